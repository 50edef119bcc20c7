"""An entity's live facts in recall order, and memory contexts refreshed in O(N log N) for N memories.

- ``fact_live_subject_page_idx`` / ``fact_live_object_page_idx``: the live facts (``active``,
  ``disputed``) of an entity as subject and as object, in ``(valid_from, id)`` order, so a recall reads
  one page of a hub's direct facts from two ordered index ranges (merged) instead of sorting all of
  them (``memory.knowledge.selectors.entity_recall``).
- ``memory_context_around`` (migration 0020) reads a memory's neighbours from the index in order
  on every call (its generic plan read the whole session before the position: O(N^2) for a
  statement touching N memories of a session).
- ``memory_context_refresh(ids)`` (migration 0020) gives the same contexts, but each context's
  ``sources`` are aggregated once per memory (``GROUP BY``) instead of by a subquery over every
  neighbour row of the call per memory: a statement touching N memories (a bulk erase, a bulk insert)
  cost O(N^2) in it, now O(N log N).
"""

from django.db import migrations, models

from core.sqlrules import ApplySqlRule


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0021_fact_graph_indexes"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="fact",
            index=models.Index(
                condition=models.Q(("status__in", ["active", "disputed"])),
                fields=["subject", "valid_from", "id"],
                name="fact_live_subject_page_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="fact",
            index=models.Index(
                condition=models.Q(("object_entity__isnull", False), ("status__in", ["active", "disputed"])),
                fields=["object_entity", "valid_from", "id"],
                name="fact_live_object_page_idx",
            ),
        ),
        ApplySqlRule("memory_context_around", "df5919b172aabf3d", previous="14f7fa1e0bfe3f02"),
        ApplySqlRule("memory_context_refresh", "b8dac672f457282d", previous="f755194d418e8463"),
    ]
