"""The memory app's SQL rules come from their files: ``memory/sql/<name>.sql`` (``core.sqlrules``).

Each file holds the definition the migrations before this one left in the database (the drift test,
``tests/test_sql_rules.py``, holds them equal), so applying them changes nothing: this migration
pins each file's version (its digest), and a later change of a rule is a migration that applies the
file's next version. Reversed, nothing is undone (the definitions were already there).
"""

from django.db import migrations

from core.sqlrules import ApplySqlRule

# name -> digest of the text applied, in an order where each function exists before one that calls it
RULES = {
    "memory_bm25_saturation": "85abaa7f57e35b04",
    "memory_lexeme_index": "4a4611d64d9df78c",
    "memory_lexical_vector": "0adf406fbe0c01e0",
    "memory_lexical_query": "675d37a73ad295bf",
    "memory_lexical_set": "3c276e7107e57a70",
    "memory_lexical_postings": "7054a0a98e679169",
    "memory_context_around": "df5919b172aabf3d",
    "memory_context_refresh": "b8dac672f457282d",
    "memory_context_inserted": "46e687bc3104036f",
    "memory_context_deleted": "4668760fe046be19",
    "memory_context_updated": "9f4c1cc6140c9bd9",
    "memory_checkpoint_save": "9182c0c35758f8eb",
    "engram_reject_event_mutation": "6845b00fe1c4f61d",
    "engram_event_redaction_only": "3a7e980b315eafb0",
    "engram_event_redactions_decided": "ec6f52ab36fecb72",
    "engram_reject_toolversion_mutation": "f80b9245125f2178",
    "engram_guard_skillversion": "cc5e2a9c88794784",
}


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0026_event_redacted_by"),
    ]

    operations = [
        ApplySqlRule(name, digest, reverse_sql=migrations.RunSQL.noop) for name, digest in RULES.items()
    ]
