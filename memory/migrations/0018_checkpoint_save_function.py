"""``memory_checkpoint_save``: a checkpoint save's lock, checks and insert in one call (issue 16).

``memory.checkpoints.services.checkpoint_save`` calls it for every save; see ``memory/sql/memory_checkpoint_save.sql``.
"""

from django.db import migrations

from core.sqlrules import ApplySqlRule

DROP_SAVE_FUNCTION = """
DROP FUNCTION IF EXISTS memory_checkpoint_save(text, text, bigint, text, bigint, bigint, jsonb, jsonb,
    integer, timestamptz, text, text, text, jsonb, text, text, bytea);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0017_consolidation_promotable_index"),
    ]

    operations = [
        ApplySqlRule("memory_checkpoint_save", "9182c0c35758f8eb", reverse_sql=DROP_SAVE_FUNCTION),
    ]
