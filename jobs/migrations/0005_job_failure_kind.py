# Whose failure a failed job is (AnalysisJob.failure_kind): the user's input, ours, or an
# operator's cancel. Adding a column with a constant default is a catalogue change in
# PostgreSQL 11+ (no table rewrite). Failed jobs from before it get their kind from the message
# they were failed with: the two fixed texts are ours; every other message was the user's.

from django.db import migrations, models

INTERNAL_ERROR = (
    "The analysis stopped because of an internal error, not because of your file. "
    "Try again with Re-analyse; if it keeps failing, please contact us."
)
CANCELLED_ERROR = "The analysis was cancelled by an operator. Use Re-analyse to run it again."


def backfill(apps, schema_editor):
    jobs = apps.get_model("jobs", "AnalysisJob").objects.filter(status="failed", failure_kind="")
    jobs.filter(error=INTERNAL_ERROR).update(failure_kind="internal")
    jobs.filter(error=CANCELLED_ERROR).update(failure_kind="cancelled")
    jobs.update(failure_kind="input")


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0004_admin_search_trigram"),
    ]

    operations = [
        migrations.AddField(
            model_name="analysisjob",
            name="failure_kind",
            field=models.CharField(
                blank=True,
                choices=[
                    ("input", "Unusable input"),
                    ("internal", "Internal error"),
                    ("cancelled", "Cancelled by an operator"),
                ],
                default="",
                max_length=16,
            ),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
