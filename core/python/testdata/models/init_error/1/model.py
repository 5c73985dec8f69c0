class TritonPythonModel:
    def initialize(self, args):
        lorem_ipsum  # noqa: F821

    def execute(self, requests):
        return []
