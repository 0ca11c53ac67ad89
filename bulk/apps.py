from django.apps import AppConfig


class BulkConfig(AppConfig):
    name = "bulk"
    default_auto_field = "django.db.models.BigAutoField"
