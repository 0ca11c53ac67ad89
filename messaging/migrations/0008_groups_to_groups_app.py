"""Group chat's tables now belong to the ``groups`` app (its 0001 took over their state; nothing
is dropped here, the tables keep their names), and their admin pages' content types follow."""

from django.db import migrations

MODELS = ("group", "grouphidden", "groupmember", "groupmessage", "grouptimelinerow")


def move_content_types(apps, schema_editor):  # type: ignore[no-untyped-def]
    content_type = apps.get_model("contenttypes", "ContentType")
    for model in MODELS:
        if not content_type.objects.filter(app_label="groups", model=model).exists():
            content_type.objects.filter(app_label="messaging", model=model).update(app_label="groups")


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0007_groups"),
        ("groups", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(name="GroupTimelineRow"),
                migrations.DeleteModel(name="Group"),
                migrations.DeleteModel(name="GroupHidden"),
                migrations.DeleteModel(name="GroupMember"),
                migrations.DeleteModel(name="GroupMessage"),
            ],
        ),
        migrations.RunPython(move_content_types, migrations.RunPython.noop),
    ]
