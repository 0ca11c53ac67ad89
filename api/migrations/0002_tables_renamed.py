"""The API-client tables take the api app's names, renamed in place (every row and foreign key
kept: RENAME TABLE on MariaDB, ALTER TABLE RENAME on SQLite)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("api", "0001_initial"), ("messaging", "0005_apiclient_to_api_cachehealth_from_unread")]

    operations = [
        migrations.AlterModelTable(name="apiclient", table=None),
        migrations.AlterModelTable(name="apiclientsender", table=None),
    ]
