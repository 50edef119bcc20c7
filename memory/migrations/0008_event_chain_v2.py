"""Chain format 2: the payload kept as canonical text, a salted body digest, the actor.

Events already in the log become format 1 and keep verifying exactly as before: the text stored
for their payload is ``json.dumps`` (sorted keys, no spaces) of the value read back from ``jsonb``,
which is what format 1 hashed. The append-only trigger is switched off for that one update, inside
this migration's transaction, by the table's owner.
"""

import json

import django.db.models.functions.comparison
from django.db import migrations, models


def carry_payloads(apps, schema_editor):
    Event = apps.get_model("memory", "Event")
    batch = []
    for event in Event.objects.only("pk", "payload").order_by("pk").iterator(chunk_size=2000):
        event.payload_json = json.dumps(
            event.payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        batch.append(event)
        if len(batch) >= 2000:
            Event.objects.bulk_update(batch, ["payload_json"])
            batch = []
    if batch:
        Event.objects.bulk_update(batch, ["payload_json"])


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0007_memory_access"),
    ]

    operations = [
        migrations.AddField(
            model_name="event",
            name="payload_json",
            field=models.TextField(default="{}", editable=False),
        ),
        migrations.AddField(
            model_name="event",
            name="hash_version",
            field=models.PositiveSmallIntegerField(default=1, editable=False),
        ),
        migrations.RunSQL(
            "SET CONSTRAINTS ALL IMMEDIATE; ALTER TABLE memory_event DISABLE TRIGGER memory_event_append_only",
            migrations.RunSQL.noop,
        ),
        migrations.RunPython(carry_payloads, migrations.RunPython.noop),
        migrations.RunSQL(
            "ALTER TABLE memory_event ENABLE TRIGGER memory_event_append_only", migrations.RunSQL.noop
        ),
        migrations.AlterField(
            model_name="event",
            name="hash_version",
            field=models.PositiveSmallIntegerField(default=2, editable=False),
        ),
        migrations.RemoveField(
            model_name="event",
            name="payload",
        ),
        migrations.AddField(
            model_name="event",
            name="payload_index",
            field=models.GeneratedField(
                db_persist=True,
                expression=django.db.models.functions.comparison.Cast("payload_json", models.JSONField()),
                output_field=models.JSONField(),
            ),
        ),
        migrations.AddField(
            model_name="event",
            name="actor",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name="event",
            name="body_salt",
            field=models.CharField(blank=True, editable=False, max_length=32),
        ),
        migrations.AddField(
            model_name="event",
            name="body_digest",
            field=models.CharField(blank=True, editable=False, max_length=64),
        ),
    ]
