from django.apps import AppConfig


class UnreadConfig(AppConfig):
    name = "unread"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The rebuild reads messaging's models, loaded by now (hence not at the top).
        from storage.counters import epoch
        from unread import rebuild

        # the counters' store sits on the floor below; how a user is repaired is unread's
        epoch.bind_rebuild(rebuild.unread_rebuild_user)
