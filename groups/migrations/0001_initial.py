"""Group chat's tables, taken over from ``messaging`` (its 0007 created them): state only, the
tables keep their names (``messaging_group*``) and their rows; nothing is created or copied."""

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("messaging", "0007_groups"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='GroupTimelineRow',
                    fields=[
                        ('pk', models.CompositePrimaryKey('gid', 'seq', blank=True, editable=False, primary_key=True, serialize=False)),
                        ('gid', models.BigIntegerField()),
                        ('seq', models.BigIntegerField()),
                        ('msgkey', models.BigIntegerField()),
                        ('sender_uid', models.BigIntegerField()),
                        ('flags', models.SmallIntegerField(default=0)),
                    ],
                    options={
                        'db_table': 'messaging_group_timeline',
                    },
                ),
                migrations.CreateModel(
                    name='Group',
                    fields=[
                        ('gid', models.BigIntegerField(primary_key=True, serialize=False)),
                        ('name', models.CharField(max_length=100)),
                        ('owner_uid', models.BigIntegerField()),
                        ('max_seq', models.BigIntegerField(default=0)),
                        ('member_count', models.IntegerField(default=0)),
                        ('history_for_new_members', models.BooleanField(default=True)),
                        ('muted', models.BooleanField(default=False, help_text='only the owner and admins may send')),
                        ('created_at', models.DateTimeField()),
                        ('dissolved_at', models.DateTimeField(blank=True, null=True)),
                        ('client_id', models.BigIntegerField(blank=True, editable=False, null=True)),
                        ('idempotency_key', models.CharField(blank=True, editable=False, max_length=128, null=True)),
                        ('digest', models.CharField(blank=True, editable=False, max_length=64)),
                    ],
                    options={
                        'db_table': 'messaging_group',
                        'constraints': [models.UniqueConstraint(fields=('client_id', 'idempotency_key'), name='uniq_group_idempotency')],
                    },
                ),
                migrations.CreateModel(
                    name='GroupHidden',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('gid', models.BigIntegerField()),
                        ('uid', models.BigIntegerField()),
                        ('seq', models.BigIntegerField()),
                    ],
                    options={
                        'db_table': 'messaging_group_hidden',
                        'indexes': [models.Index(fields=['gid', 'seq'], name='group_hidden_seq')],
                        'constraints': [models.UniqueConstraint(fields=('gid', 'uid', 'seq'), name='uniq_group_hidden')],
                    },
                ),
                migrations.CreateModel(
                    name='GroupMember',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('gid', models.BigIntegerField()),
                        ('uid', models.BigIntegerField()),
                        ('role', models.CharField(choices=[('owner', 'Owner'), ('admin', 'Admin'), ('member', 'Member')], default='member', max_length=6)),
                        ('joined_seq', models.BigIntegerField(default=0)),
                        ('read_seq', models.BigIntegerField(default=0)),
                        ('left_seq', models.BigIntegerField(blank=True, null=True)),
                        ('muted', models.BooleanField(default=False)),
                        ('joined_at', models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        'db_table': 'messaging_group_member',
                        'indexes': [models.Index(fields=['uid', 'left_seq'], name='group_member_uid'), models.Index(fields=['gid', 'left_seq', 'uid'], name='group_member_gid')],
                        'constraints': [models.UniqueConstraint(fields=('gid', 'uid'), name='uniq_group_member')],
                    },
                ),
                migrations.CreateModel(
                    name='GroupMessage',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('gid', models.BigIntegerField()),
                        ('seq', models.BigIntegerField()),
                        ('msgkey', models.BigIntegerField(unique=True)),
                        ('sender_uid', models.BigIntegerField()),
                        ('client_msg_id', models.CharField(max_length=64)),
                        ('digest', models.CharField(help_text='sha256 of the canonical request body', max_length=64)),
                        ('mentions', models.JSONField(blank=True, default=list)),
                        ('recalled', models.BooleanField(default=False)),
                        ('completed', models.BooleanField(default=False, help_text='the timeline and Redis have it; a replay must not redo it')),
                    ],
                    options={
                        'db_table': 'messaging_group_message',
                        'indexes': [models.Index(fields=['completed', 'gid'], name='group_msg_pending')],
                        'constraints': [models.UniqueConstraint(fields=('gid', 'seq'), name='uniq_group_seq'), models.UniqueConstraint(fields=('sender_uid', 'client_msg_id'), name='uniq_group_client_msg')],
                    },
                ),
            ],
        ),
    ]
