"""Scheduled checks (issue 28): a chain check is full, or incremental (the events since the last
intact check, linked to the hash it ended on, and a rotating window of older events re-verified)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("compliance", "0005_legalhold_release"),
    ]

    operations = [
        migrations.AddField(
            model_name="chaincheck",
            name="scope",
            field=models.CharField(
                choices=[("full", "Full"), ("incremental", "Incremental")], default="full", max_length=12
            ),
        ),
        migrations.AddField(
            model_name="chaincheck",
            name="from_seq",
            field=models.BigIntegerField(blank=True, help_text="the first new event verified", null=True),
        ),
        migrations.AddField(
            model_name="chaincheck",
            name="recheck_from",
            field=models.BigIntegerField(blank=True, help_text="older events re-verified from", null=True),
        ),
        migrations.AddField(
            model_name="chaincheck",
            name="recheck_to",
            field=models.BigIntegerField(blank=True, help_text="older events re-verified to", null=True),
        ),
    ]
