"""A contradiction points to the ``decision`` event that closed it, and a dismissal no longer leaves
its new fact ``disputed``: the facts an earlier dismissal (or a retraction of the fact they
disputed) left disputed with no open contradiction become active again, queued for the graph
projection (the rule ``memory.knowledge.services`` keeps from now on)."""

import django.db.models.deletion
from django.db import migrations, models
from django.utils import timezone


def settle_orphaned_disputes(apps, schema_editor):
    alias = schema_editor.connection.alias
    Fact = apps.get_model("memory", "Fact")
    Contradiction = apps.get_model("memory", "Contradiction")
    GraphOutbox = apps.get_model("memory", "GraphOutbox")
    open_new = Contradiction.objects.using(alias).filter(status="open").values("new_fact")
    orphans = list(
        Fact.objects.using(alias)
        .filter(status="disputed")
        .exclude(pk__in=open_new)
        .values_list("pk", flat=True)
    )
    if not orphans:
        return
    Fact.objects.using(alias).filter(pk__in=orphans).update(status="active")
    now = timezone.now()
    GraphOutbox.objects.using(alias).bulk_create([GraphOutbox(fact_id=pk, created_at=now) for pk in orphans])


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0024_drop_semantic_search_gin"),
    ]

    operations = [
        migrations.AddField(
            model_name="contradiction",
            name="decision_event",
            field=models.ForeignKey(
                blank=True,
                help_text="the decision in the trail that closed it",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="memory.event",
            ),
        ),
        migrations.AlterField(
            model_name="contradiction",
            name="resolution",
            field=models.CharField(
                blank=True,
                choices=[
                    ("accept_new", "accept the new fact (the existing one is superseded)"),
                    ("keep_existing", "keep the existing fact (the new one is retracted)"),
                    ("both_valid", "both are valid (the predicate becomes 'many')"),
                    ("dismiss", "dismiss (not a contradiction: the new fact stands beside the existing one)"),
                ],
                max_length=16,
            ),
        ),
        migrations.RunPython(settle_orphaned_disputes, migrations.RunPython.noop),
    ]
