"""An export whose archive an erasure deleted is ``withdrawn``: its own state, shown as such, with no
download (those withdrawn before were left ``done`` with an empty path and the erasure named in
``error``)."""

from django.db import migrations, models

WITHDRAWN_NOTE = "archive withdrawn by erasure"


def mark_withdrawn(apps, schema_editor):
    Export = apps.get_model("compliance", "Export")
    Export.objects.using(schema_editor.connection.alias).filter(
        status="done", path="", error__startswith=WITHDRAWN_NOTE
    ).update(status="withdrawn")


def unmark_withdrawn(apps, schema_editor):
    Export = apps.get_model("compliance", "Export")
    Export.objects.using(schema_editor.connection.alias).filter(status="withdrawn").update(status="done")


class Migration(migrations.Migration):
    dependencies = [
        ("compliance", "0003_lifecycle"),
    ]

    operations = [
        migrations.AlterField(
            model_name="export",
            name="status",
            field=models.CharField(
                choices=[
                    ("queued", "Queued"),
                    ("running", "Running"),
                    ("done", "Done"),
                    ("failed", "Failed"),
                    ("withdrawn", "Withdrawn"),
                ],
                default="queued",
                max_length=10,
            ),
        ),
        migrations.RunPython(mark_withdrawn, unmark_withdrawn),
    ]
