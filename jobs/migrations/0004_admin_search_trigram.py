# Trigram indexes for the admin's search by file and document name (jobs.admin.OwnerSearchMixin).
# Built CONCURRENTLY so a deploy onto a large table never blocks uploads or saves while the
# index builds; that needs a migration outside a transaction. pg_trgm is a trusted extension
# (PostgreSQL 13+): a database owner may create it without superuser rights.

import django.contrib.postgres.indexes
import django.db.models.functions.text
from django.conf import settings
from django.contrib.postgres.operations import AddIndexConcurrently, TrigramExtension
from django.db import migrations


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("jobs", "0003_admin_writer_indexes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        TrigramExtension(),
        AddIndexConcurrently(
            model_name="analysisjob",
            index=django.contrib.postgres.indexes.GinIndex(
                django.contrib.postgres.indexes.OpClass(
                    django.db.models.functions.text.Upper("filename"), name="gin_trgm_ops"
                ),
                name="job_filename_trgm_idx",
            ),
        ),
        AddIndexConcurrently(
            model_name="analysisrun",
            index=django.contrib.postgres.indexes.GinIndex(
                django.contrib.postgres.indexes.OpClass(
                    django.db.models.functions.text.Upper("document"), name="gin_trgm_ops"
                ),
                name="run_document_trgm_idx",
            ),
        ),
    ]
