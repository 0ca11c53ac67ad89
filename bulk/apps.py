from django.apps import AppConfig


class BulkConfig(AppConfig):
    name = "bulk"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """What bulk registers (one mechanism): a recall of a campaign's message, and a change
        of it made in SQL, reach its recipients through the campaign's batches; a message's admin
        page links to the campaigns that sent it; the modules that enqueue bulk's tasks get the
        task objects (bulk/tasks.py imports them, so they cannot import it)."""
        from bulk import recall, services, tasks
        from bulk.admin import campaign_links
        from messaging.admin import register_message_links
        from messaging.services import register_change_fanout, register_recall_fanout

        register_recall_fanout(recall.campaign_recall)
        register_change_fanout(recall.campaign_changed)
        register_message_links(campaign_links)
        for channel, task in tasks.PLAN.items():
            services.PLAN_TASK[channel].bind(task)
        for channel, task in tasks.RUN_BATCH.items():
            services.RUN_BATCH_TASK[channel].bind(task)
        recall.TASK.bind(tasks.recall_batch)
        recall.REFRESH_TASK.bind(tasks.refresh_batch)
