"""The data lifecycle (issue 14): retention rules and runs, legal holds, erasure requests with their
receipts, the redactions a chain check counted; and what the "compliance officer" group may now
do: edit retention rules, place and release legal holds, request erasures and approve another
officer's (four eyes: never their own, which the service refuses). Permissions are created first,
as in 0002 (a new schema has none yet when this runs).
"""

import uuid

import django.utils.timezone
from django.apps import apps as global_apps
from django.contrib.auth.management import create_permissions
from django.db import migrations, models

OFFICER = "compliance officer"
GRANTS = [
    "add_retentionrule",
    "change_retentionrule",
    "delete_retentionrule",
    "add_legalhold",
    "change_legalhold",
    "add_erasurerequest",
    "approve_erasurerequest",
    "view_retentionrule",
    "view_retentionrun",
    "view_legalhold",
    "view_erasurerequest",
]


def grant(apps, schema_editor):
    alias = schema_editor.connection.alias
    ContentType = apps.get_model("contenttypes", "ContentType")
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    ContentType.objects.clear_cache()
    create_permissions(global_apps.get_app_config("compliance"), verbosity=0, using=alias, apps=apps)
    group, _ = Group.objects.using(alias).get_or_create(name=OFFICER)
    group.permissions.add(
        *Permission.objects.using(alias).filter(content_type__app_label="compliance", codename__in=GRANTS)
    )


def revoke(apps, schema_editor):
    alias = schema_editor.connection.alias
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group = Group.objects.using(alias).filter(name=OFFICER).first()
    if group is not None:
        group.permissions.remove(
            *Permission.objects.using(alias).filter(content_type__app_label="compliance", codename__in=GRANTS)
        )


class Migration(migrations.Migration):
    dependencies = [
        ("compliance", "0002_compliance_officer_reads_everything"),
        ("memory", "0015_lifecycle_data_subjects"),
    ]

    operations = [
        migrations.CreateModel(
            name="ErasureRequest",
            fields=[
                (
                    "id",
                    models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False),
                ),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("subject", "a data subject (the person the data is about)"),
                            ("session", "a session"),
                            ("agent", "an agent"),
                            ("tag", "a memory tag"),
                            ("entity", "a knowledge entity"),
                            ("tenant", "the whole tenant"),
                        ],
                        max_length=8,
                    ),
                ),
                ("value", models.CharField(blank=True, max_length=300)),
                ("value_digest", models.CharField(max_length=64)),
                ("legal_basis", models.CharField(max_length=300)),
                ("note", models.TextField(blank=True)),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("requested", "Requested"),
                            ("approved", "Approved"),
                            ("running", "Running"),
                            ("done", "Done"),
                            ("failed", "Failed"),
                        ],
                        default="requested",
                        max_length=10,
                    ),
                ),
                ("requested_by", models.CharField(max_length=200)),
                ("requested_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("approved_by", models.CharField(blank=True, max_length=200)),
                ("approved_at", models.DateTimeField(blank=True, null=True)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("progress", models.JSONField(blank=True, default=dict)),
                ("receipt", models.TextField(blank=True)),
                ("receipt_signature", models.CharField(blank=True, max_length=128)),
                ("receipt_key_id", models.CharField(blank=True, max_length=64)),
                ("error", models.TextField(blank=True)),
            ],
            options={
                "ordering": ["-requested_at"],
                "permissions": [("approve_erasurerequest", "Can approve an erasure (not one's own)")],
            },
        ),
        migrations.CreateModel(
            name="RetentionRun",
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
                        choices=[("running", "Running"), ("done", "Done"), ("failed", "Failed")],
                        default="running",
                        max_length=8,
                    ),
                ),
                ("started_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("removed", models.JSONField(blank=True, default=dict)),
                ("error", models.TextField(blank=True)),
            ],
            options={
                "ordering": ["-started_at", "-id"],
            },
        ),
        migrations.AddField(
            model_name="chaincheck",
            name="redacted",
            field=models.BigIntegerField(default=0, help_text="events checked whose content was erased"),
        ),
        migrations.CreateModel(
            name="LegalHold",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("subject", "a data subject (the person the data is about)"),
                            ("session", "a session"),
                            ("agent", "an agent"),
                            ("tag", "a memory tag"),
                            ("entity", "a knowledge entity"),
                            ("tenant", "the whole tenant"),
                        ],
                        max_length=8,
                    ),
                ),
                ("value", models.CharField(blank=True, max_length=300)),
                ("reason", models.TextField()),
                ("placed_by", models.CharField(max_length=200)),
                ("placed_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("released_by", models.CharField(blank=True, max_length=200)),
                ("released_at", models.DateTimeField(blank=True, null=True)),
                ("release_reason", models.TextField(blank=True)),
            ],
            options={
                "ordering": ["-placed_at", "-id"],
                "indexes": [models.Index(fields=["kind", "value"], name="legalhold_target_idx")],
            },
        ),
        migrations.CreateModel(
            name="RetentionRule",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("layer", models.CharField(max_length=32)),
                ("memory_type", models.CharField(blank=True, help_text="empty: every type", max_length=32)),
                ("keep_days", models.PositiveIntegerField(help_text="days kept, counted as the layer says")),
                ("updated_by", models.CharField(blank=True, max_length=200)),
                ("updated_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "ordering": ["layer", "memory_type"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("layer", "memory_type"), name="retention_rule_layer_type_uniq"
                    )
                ],
            },
        ),
        migrations.RunPython(grant, revoke),
    ]
