from django.apps import AppConfig


class UnreadConfig(AppConfig):
    name = "unread"
    default_auto_field = "django.db.models.BigAutoField"
