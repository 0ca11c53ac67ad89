from django.apps import AppConfig


class RetentionConfig(AppConfig):
    """Data that ages out (retention/services.py). No models: it reads and deletes other apps'
    rows through their stores; its beat entry is ``retention-run`` in CELERY_BEAT_SCHEDULE."""

    name = "retention"
    default_auto_field = "django.db.models.BigAutoField"
