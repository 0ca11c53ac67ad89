from django.apps import AppConfig


class BulkConfig(AppConfig):
    name = "bulk"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """What bulk adds to messaging, registered here (one mechanism): a recall of a campaign's
        message reaches its recipients through the campaign's batches, and a message's admin
        page links to the campaigns that sent it."""
        from bulk.admin import campaign_links
        from bulk.recall import campaign_recall
        from messaging.admin import register_message_links
        from messaging.services import register_recall_fanout

        register_recall_fanout(campaign_recall)
        register_message_links(campaign_links)
