"""A legal hold is released with a reason and, when it was placed needing one (``four_eyes``, the
default, and what the holds already placed get), by a second officer after the first asks
(``release_requested_by`` / ``_at``)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("compliance", "0004_export_withdrawn"),
    ]

    operations = [
        migrations.AddField(
            model_name="legalhold",
            name="four_eyes",
            field=models.BooleanField(
                default=True,
                help_text="one officer asks for the release with the reason, another confirms it",
                verbose_name="release needs a second officer",
            ),
        ),
        migrations.AddField(
            model_name="legalhold",
            name="release_requested_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="legalhold",
            name="release_requested_by",
            field=models.CharField(blank=True, max_length=200),
        ),
    ]
