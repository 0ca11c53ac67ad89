"""The cache-health admin page (an unmanaged model, no table) moves to messaging."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("unread", "0001_initial")]

    operations = [migrations.DeleteModel(name="CacheHealth")]
