from django.apps import AppConfig


class CachesyncConfig(AppConfig):
    name = "cachesync"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # lag.py reads Redis through infra: imported here, once the apps are loaded
        from cachesync import lag
        from infra import metrics

        metrics.register_gauges(lag.gauges)
