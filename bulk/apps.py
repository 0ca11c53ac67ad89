from django.apps import AppConfig


class BulkConfig(AppConfig):
    name = "bulk"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # A recall of a campaign's message reaches its recipients through the campaign's batches.
        from bulk.recall import campaign_recall
        from messaging import services

        if campaign_recall not in services.RECALL_FANOUTS:
            services.RECALL_FANOUTS.append(campaign_recall)
