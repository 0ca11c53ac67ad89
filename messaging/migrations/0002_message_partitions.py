"""Partition ``messaging_message`` by month of msgkey on MariaDB/MySQL (no-op elsewhere).

Creates monthly partitions from last month through three months ahead, plus ``pmax``; from then
on ``manage.py content_partitions`` (a daily beat or cron job) keeps adding the coming months.
"""

from datetime import UTC, datetime

from django.db import migrations

from storage import partitions


def partition(apps, schema_editor):
    if schema_editor.connection.vendor != "mysql":
        return
    this_month = partitions.Month.of(datetime.now(UTC))
    with schema_editor.connection.cursor() as cursor:
        if partitions.existing(cursor) is None:
            partitions.partition_table(cursor, this_month.plus(-1), this_month.plus(3))


def unpartition(apps, schema_editor):
    if schema_editor.connection.vendor != "mysql":
        return
    with schema_editor.connection.cursor() as cursor:
        partitions.unpartition(cursor)


class Migration(migrations.Migration):
    atomic = False  # ALTER TABLE commits implicitly on MySQL

    dependencies = [("messaging", "0001_initial")]

    operations = [migrations.RunPython(partition, unpartition, elidable=False)]
