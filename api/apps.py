"""The platform layer under every app: the API's error shape, base view and validation, bearer
tokens, API clients and scopes, id fields and paging."""

from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "API clients"
