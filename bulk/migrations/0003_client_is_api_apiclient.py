"""Campaigns and audiences point at ``api.ApiClient`` (moved from messaging): state only, the
foreign keys already reference that table."""

import django.db.models.deletion
from django.db import migrations, models


def client_fk() -> models.ForeignKey:
    return models.ForeignKey(
        blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to="api.apiclient"
    )


class Migration(migrations.Migration):
    dependencies = [("bulk", "0002_campaign_paused_time"), ("api", "0001_initial")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(model_name="audience", name="client", field=client_fk()),
                migrations.AlterField(model_name="campaign", name="client", field=client_fk()),
            ],
        )
    ]
