from django.apps import AppConfig


class GroupsConfig(AppConfig):
    """Group chat on read diffusion: groups, members, the send ledger and the timelines."""

    name = "groups"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """A recall of a group message's msgkey (any route) reaches the group's timeline, and a
        change of its content made in SQL the group's head; the services send
        ``events_publish`` (they cannot import the tasks that run them)."""
        from groups import services, tasks
        from messaging.services import register_change_fanout, register_recall_fanout

        register_recall_fanout(services.group_copies_recall)
        register_change_fanout(services.group_message_changed)
        services.EVENTS_TASK.bind(tasks.events_publish)
