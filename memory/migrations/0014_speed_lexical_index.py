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

SATURATION = """
CREATE FUNCTION memory_bm25_saturation(tf integer, dl integer) RETURNS double precision
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN tf * 2.2::float8 / (tf + 1.2::float8 * (0.25::float8 + 0.75::float8 * dl / 8.0::float8));
"""

FUNCTIONS = (
    SATURATION
    + """
CREATE FUNCTION memory_lexeme_index(lexeme text) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN ((hashtext(lexeme)::bigint & 2147483647) % 999999999 + 1)::integer;

CREATE FUNCTION memory_lexical_vector(doc tsvector) RETURNS sparsevec
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (coalesce('{' || string_agg(i || ':' || w, ',' ORDER BY i) || '}', '{}') || '/1000000000')::sparsevec
    FROM (SELECT memory_lexeme_index(u.lexeme) AS i,
                 sum(memory_bm25_saturation(coalesce(array_length(u.positions, 1), 1), length(doc))) AS w
          FROM unnest(doc) AS u GROUP BY 1) t
$$;

CREATE FUNCTION memory_lexical_query(lexemes text[], weights double precision[]) RETURNS sparsevec
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (coalesce('{' || string_agg(i || ':' || w, ',' ORDER BY i) || '}', '{}') || '/1000000000')::sparsevec
    FROM (SELECT memory_lexeme_index(q.lexeme) AS i, sum(q.weight) AS w
          FROM unnest(lexemes, weights) AS q(lexeme, weight) GROUP BY 1) t
$$;

CREATE FUNCTION memory_lexical_set() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.lexical := memory_lexical_vector(to_tsvector('english'::regconfig, COALESCE(NEW.content, '')));
    RETURN NEW;
END $$;

CREATE TRIGGER semantic_lexical_set
    BEFORE INSERT OR UPDATE OF content ON memory_semanticmemory
    FOR EACH ROW EXECUTE FUNCTION memory_lexical_set();

CREATE FUNCTION memory_lexical_postings() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM memory_lexicalposting WHERE memory_id = OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO memory_lexicalposting (memory_id, lexeme, impact)
        SELECT NEW.id, u.lexeme,
               memory_bm25_saturation(coalesce(array_length(u.positions, 1), 1), length(NEW.search))
        FROM unnest(NEW.search) AS u;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER semantic_lexical_postings
    AFTER INSERT OR DELETE OR UPDATE OF content ON memory_semanticmemory
    FOR EACH ROW EXECUTE FUNCTION memory_lexical_postings();

ALTER TABLE memory_lexicalposting ALTER COLUMN lexeme SET STATISTICS 1000;

UPDATE memory_semanticmemory SET lexical = memory_lexical_vector(search);

INSERT INTO memory_lexicalposting (memory_id, lexeme, impact)
SELECT m.id, u.lexeme,
       memory_bm25_saturation(coalesce(array_length(u.positions, 1), 1), length(m.search))
FROM memory_semanticmemory m, unnest(m.search) AS u;

ANALYZE memory_lexicalposting;
"""
)

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
        migrations.RunSQL(FUNCTIONS, DROP_FUNCTIONS),
    ]
