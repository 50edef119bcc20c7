"""Chain checks, anchors and exports. Anchors are append-only, as events are: the same trigger
function (memory 0002) rejects UPDATE, DELETE and TRUNCATE on them."""

import uuid

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("memory", "0009_checkpoint_per_agent"),  # engram_reject_event_mutation()
    ]

    operations = [
        migrations.CreateModel(
            name="Export",
            fields=[
                (
                    "id",
                    models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False),
                ),
                ("requested_by", models.CharField(max_length=200)),
                (
                    "scope",
                    models.CharField(
                        choices=[
                            ("session", "one session"),
                            ("agent", "one agent's events"),
                            ("range", "a time range"),
                            ("all", "everything"),
                        ],
                        max_length=8,
                    ),
                ),
                ("session_id", models.CharField(blank=True, max_length=200)),
                ("agent_name", models.CharField(blank=True, max_length=100)),
                ("occurred_from", models.DateTimeField(blank=True, null=True)),
                ("occurred_to", models.DateTimeField(blank=True, null=True)),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("queued", "Queued"),
                            ("running", "Running"),
                            ("done", "Done"),
                            ("failed", "Failed"),
                        ],
                        default="queued",
                        max_length=8,
                    ),
                ),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("events_total", models.BigIntegerField(default=0)),
                ("events_done", models.BigIntegerField(default=0)),
                ("first_seq", models.BigIntegerField(blank=True, null=True)),
                ("last_seq", models.BigIntegerField(blank=True, null=True)),
                ("path", models.CharField(blank=True, max_length=500)),
                ("size", models.BigIntegerField(blank=True, null=True)),
                ("sha256", models.CharField(blank=True, max_length=64)),
                ("error", models.TextField(blank=True)),
            ],
            options={
                "ordering": ["-created_at"],
                "permissions": [("export_trail", "Can export the trail")],
            },
        ),
        migrations.CreateModel(
            name="Anchor",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("seq", models.BigIntegerField()),
                ("hash", models.CharField(max_length=64)),
                ("anchored_at", models.DateTimeField()),
                ("key_id", models.CharField(max_length=64)),
                ("statement", models.TextField()),
                ("signature", models.CharField(max_length=128)),
                ("sink", models.CharField(blank=True, max_length=500)),
                ("sink_error", models.TextField(blank=True)),
            ],
            options={
                "ordering": ["-seq", "-id"],
                "indexes": [models.Index(fields=["seq"], name="anchor_seq_idx")],
            },
        ),
        migrations.CreateModel(
            name="ChainCheck",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("requested_by", models.CharField(max_length=200)),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("queued", "Queued"),
                            ("running", "Running"),
                            ("intact", "Intact"),
                            ("broken", "Broken"),
                            ("failed", "Failed"),
                        ],
                        default="queued",
                        max_length=8,
                    ),
                ),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("total", models.BigIntegerField(default=0)),
                ("checked", models.BigIntegerField(default=0)),
                ("head_seq", models.BigIntegerField(blank=True, null=True)),
                ("head_hash", models.CharField(blank=True, max_length=64)),
                ("anchors_checked", models.PositiveIntegerField(default=0)),
                ("findings", models.JSONField(blank=True, default=list)),
                ("error", models.TextField(blank=True)),
            ],
            options={
                "ordering": ["-created_at", "-id"],
                "permissions": [("run_chaincheck", "Can run a verification of the trail")],
                "indexes": [models.Index(fields=["status", "finished_at"], name="chaincheck_status_idx")],
            },
        ),
        migrations.RunSQL(
            "CREATE TRIGGER compliance_anchor_append_only BEFORE UPDATE OR DELETE ON compliance_anchor "
            "FOR EACH ROW EXECUTE FUNCTION engram_reject_event_mutation(); "
            "CREATE TRIGGER compliance_anchor_no_truncate BEFORE TRUNCATE ON compliance_anchor "
            "FOR EACH STATEMENT EXECUTE FUNCTION engram_reject_event_mutation();",
            "DROP TRIGGER IF EXISTS compliance_anchor_no_truncate ON compliance_anchor; "
            "DROP TRIGGER IF EXISTS compliance_anchor_append_only ON compliance_anchor;",
        ),
    ]
