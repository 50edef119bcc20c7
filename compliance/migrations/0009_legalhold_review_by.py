"""Legal holds get a review date: the placed ones ``HOLD_REVIEW_DAYS`` after they were placed."""

from django.db import migrations, models

import compliance.models


class Migration(migrations.Migration):
    dependencies = [("compliance", "0008_sql_rules_from_files")]

    operations = [
        migrations.AddField(
            model_name="legalhold",
            name="review_by",
            field=models.DateField(null=True),
        ),
        migrations.RunSQL(
            "UPDATE compliance_legalhold SET review_by = (placed_at AT TIME ZONE 'UTC')::date + 90",
            migrations.RunSQL.noop,
        ),
        migrations.AlterField(
            model_name="legalhold",
            name="review_by",
            field=models.DateField(
                default=compliance.models.hold_review_default,
                help_text="the date by which an officer decides whether the hold is still needed (UTC)",
                verbose_name="review by",
            ),
        ),
    ]
