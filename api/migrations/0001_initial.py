"""ApiClient and ApiClientSender move from ``messaging`` to ``api``: state only, no row copied.

The tables stay where messaging's migrations created them until 0002 renames them in place.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [("messaging", "0004_clientmessage_msgkey_index")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="ApiClient",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("name", models.CharField(max_length=100, unique=True)),
                        ("token_hash", models.CharField(editable=False, max_length=64, unique=True)),
                        ("token_prefix", models.CharField(editable=False, max_length=8)),
                        ("scopes", models.JSONField(default=list, help_text='e.g. ["send", "campaigns"]')),
                        ("is_operator", models.BooleanField(default=False, help_text="may recall any message")),
                        ("is_active", models.BooleanField(default=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("revoked_at", models.DateTimeField(blank=True, null=True)),
                    ],
                    options={"db_table": "messaging_apiclient"},
                ),
                migrations.CreateModel(
                    name="ApiClientSender",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("uid", models.BigIntegerField()),
                        ("client", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="senders", to="api.apiclient")),
                    ],
                    options={
                        "db_table": "messaging_apiclientsender",
                        "constraints": [models.UniqueConstraint(fields=("client", "uid"), name="uniq_client_sender")],
                    },
                ),
            ],
        )
    ]
