"""ApiClient and ApiClientSender now belong to ``api`` (its 0001 took over their state; nothing
is dropped here), and the cache-health admin page (no table) moves here from ``unread``."""

from django.db import migrations, models


def move_content_types(apps, schema_editor):  # type: ignore[no-untyped-def]
    content_type = apps.get_model("contenttypes", "ContentType")
    moves = [("messaging", "api", "apiclient"), ("messaging", "api", "apiclientsender"),
             ("unread", "messaging", "cachehealth")]
    for old, new, model in moves:
        if not content_type.objects.filter(app_label=new, model=model).exists():
            content_type.objects.filter(app_label=old, model=model).update(app_label=new)


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0004_clientmessage_msgkey_index"),
        ("api", "0001_initial"),
        ("bulk", "0003_client_is_api_apiclient"),
        ("unread", "0002_cachehealth_to_messaging"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(name="ApiClientSender"),
                migrations.DeleteModel(name="ApiClient"),
            ],
        ),
        migrations.CreateModel(
            name="CacheHealth",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
            ],
            options={
                "verbose_name": "conversation cache health",
                "verbose_name_plural": "conversation cache health",
                "managed": False,
            },
        ),
        migrations.RunPython(move_content_types, migrations.RunPython.noop),
    ]
