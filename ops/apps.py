from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "ops"

    def ready(self) -> None:
        from ops import checks  # noqa: F401  (registers the deploy-time checks)
