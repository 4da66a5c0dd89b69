# A manual "record now" names the operator who asked for it (RunEvent.operator), instead of
# posing as a sweeper; the recorded kind's label no longer says "by sweeper". Adding a column
# with a constant default is a catalogue change in PostgreSQL 11+ (no table rewrite).

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0005_job_failure_kind"),
    ]

    operations = [
        migrations.AddField(
            model_name="runevent",
            name="operator",
            field=models.CharField(blank=True, default="", max_length=150),
        ),
        migrations.AlterField(
            model_name="runevent",
            name="kind",
            field=models.CharField(
                choices=[
                    ("recorded", "Recorded"),
                    ("judged", "Judged"),
                    ("trimmed", "doc_html trimmed"),
                ],
                max_length=16,
            ),
        ),
    ]
