class TritonPythonModel:
    def execute(self, requests):
        return lorem_ipsum  # noqa: F821 — the NameError is the point
