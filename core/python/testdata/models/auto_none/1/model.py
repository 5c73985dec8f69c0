class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        return None

    def execute(self, requests):
        return []
