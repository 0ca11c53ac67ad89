"""Project-level app: registers the start-up checks of the chosen storage backends."""

from django.apps import AppConfig


class ConfigConfig(AppConfig):
    name = "config"
    label = "missive_config"

    def ready(self) -> None:
        from config import checks  # noqa: F401  (registers the checks)
