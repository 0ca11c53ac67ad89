"""The live app: WebSocket delivery to online devices. On start it registers its publisher (and
its group task) as the sinks of ``infra.live_hooks``, through which messaging and bulk push."""

from django.apps import AppConfig


class LiveConfig(AppConfig):
    name = "live"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from infra import live_hooks
        from live.services import publish_all
        from live.tasks import enqueue_group_push

        live_hooks.register(publish_all, enqueue_group_push)
