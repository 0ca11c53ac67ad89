from django.apps import AppConfig


class MessagingConfig(AppConfig):
    name = "messaging"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Models must be loaded before these modules import them (hence not at the top).
        from infra import metrics
        from messaging import convlist, services, tasks
        from storage import events
        from storage.convcache import mysql_tier, prewarm

        metrics.register_gauges(prewarm.gauges)
        metrics.register_gauges(events.stream_metrics)
        prewarm.TASK.bind(tasks.convcache_prewarm)  # it runs prewarm, so prewarm cannot import it
        services.EVENTS_TASK.bind(tasks.events_publish)  # services cannot import tasks
        mysql_tier.bind(convlist)  # the cache's truth: messaging's rows, read by messaging
