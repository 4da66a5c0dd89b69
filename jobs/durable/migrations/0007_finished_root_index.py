"""Purge's index holds finished root instances only (child workflows go with their root).

Built before the old one is dropped, both without blocking writes (CONCURRENTLY, outside a
transaction), so workers and web requests go on during a rolling deploy.
"""

from django.conf import settings
from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("durable", "0006_instance_version_from_session"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="instance",
            index=models.Index(
                condition=models.Q(finished_at__isnull=False, parent_instance__isnull=True),
                fields=["finished_at"],
                name="durable_inst_finished_root",
            ),
        ),
        RemoveIndexConcurrently(
            model_name="instance",
            name="durable_inst_finished",
        ),
    ]
