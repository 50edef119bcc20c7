import django.db.models.functions.text
from django.db import migrations, models


class Migration(migrations.Migration):
    """A fact's identity includes its end user (docs/decisions/0098): one live row per (subject,
    predicate, data subject, object), the object key held as its digest."""

    dependencies = [
        ("agents", "0005_apikey_data_subject"),
        ("memory", "0033_extraction_job"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="fact",
            name="fact_live_uniq",
        ),
        migrations.AddConstraint(
            model_name="fact",
            constraint=models.UniqueConstraint(
                models.F("subject"),
                models.F("predicate"),
                models.F("data_subject"),
                django.db.models.functions.text.MD5("object_key"),
                condition=models.Q(("status__in", ["active", "disputed"])),
                name="fact_live_uniq",
            ),
        ),
    ]
