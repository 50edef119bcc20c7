"""The lexical index of semantic memory: BM25 postings and a sparse vector per memory, kept by triggers.

- ``memory_bm25_saturation(tf, dl)``: the one definition of a term's BM25 saturation (k1 = 1.2,
  b = 0.75, average document length 8 lexemes: ``BM25_K1``, ``BM25_B``, ``AVG_DOC_LEXEMES`` of
  ``memory.semantic.models``, frozen here as a migration must be).
- ``memory_lexical_vector(search)``: those saturations as a ``sparsevec``, lexemes hashed into
  ``LEXICAL_DIMENSIONS``; ``memory_lexical_query(lexemes, idfs)`` the query's side in the same space,
  so a memory's BM25 score is one dot product.
- A BEFORE trigger sets ``lexical`` from ``content`` (the expression of the generated ``search``);
  an AFTER trigger keeps ``memory_lexicalposting`` equal to ``search`` on insert, content change
  (erasure) and delete, whatever wrote the row.
- The lexeme column gets 1,000 most-common values in its statistics: the query side reads document
  frequencies from them (``selectors.lexeme_idf``).
"""

import pgvector.django.sparsevec
from django.db import migrations, models

from core.sqlrules import ApplySqlRule

# After the functions: the statistics and the index of the rows already there.
BACKFILL = """
ALTER TABLE memory_lexicalposting ALTER COLUMN lexeme SET STATISTICS 1000;

UPDATE memory_semanticmemory SET lexical = memory_lexical_vector(search);

INSERT INTO memory_lexicalposting (memory_id, lexeme, impact)
SELECT m.id, u.lexeme,
       memory_bm25_saturation(coalesce(array_length(u.positions, 1), 1), length(m.search))
FROM memory_semanticmemory m, unnest(m.search) AS u;

ANALYZE memory_lexicalposting;
"""

DROP_FUNCTIONS = """
DROP TRIGGER IF EXISTS semantic_lexical_postings ON memory_semanticmemory;
DROP TRIGGER IF EXISTS semantic_lexical_set ON memory_semanticmemory;
DROP FUNCTION IF EXISTS memory_lexical_postings();
DROP FUNCTION IF EXISTS memory_lexical_set();
DROP FUNCTION IF EXISTS memory_lexical_query(text[], double precision[]);
DROP FUNCTION IF EXISTS memory_lexical_vector(tsvector);
DROP FUNCTION IF EXISTS memory_lexeme_index(text);
DROP FUNCTION IF EXISTS memory_bm25_saturation(integer, integer);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0013_consolidation_forgetting_summaries"),
    ]

    operations = [
        migrations.AddField(
            model_name="semanticmemory",
            name="lexical",
            field=pgvector.django.sparsevec.SparseVectorField(
                blank=True, dimensions=1000000000, editable=False, null=True
            ),
        ),
        migrations.CreateModel(
            name="LexicalPosting",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "memory_id", "lexeme", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("lexeme", models.TextField()),
                ("impact", models.FloatField()),
                (
                    "memory",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=models.DO_NOTHING,
                        related_name="+",
                        to="memory.semanticmemory",
                    ),
                ),
            ],
            options={
                "verbose_name": "lexical posting",
                "indexes": [
                    models.Index(
                        models.F("lexeme"),
                        models.OrderBy(models.F("impact"), descending=True),
                        models.F("memory"),
                        name="lexical_posting_rank_idx",
                    )
                ],
            },
        ),
        migrations.RunSQL(migrations.RunSQL.noop, DROP_FUNCTIONS),  # the rules below, undone
        ApplySqlRule("memory_bm25_saturation", "a0eb33084a051925", reverse_sql=migrations.RunSQL.noop),
        ApplySqlRule("memory_lexeme_index", "4a4611d64d9df78c", reverse_sql=migrations.RunSQL.noop),
        ApplySqlRule("memory_lexical_vector", "0adf406fbe0c01e0", reverse_sql=migrations.RunSQL.noop),
        ApplySqlRule("memory_lexical_query", "675d37a73ad295bf", reverse_sql=migrations.RunSQL.noop),
        ApplySqlRule("memory_lexical_set", "3c276e7107e57a70", reverse_sql=migrations.RunSQL.noop),
        ApplySqlRule("memory_lexical_postings", "7054a0a98e679169", reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
    ]
