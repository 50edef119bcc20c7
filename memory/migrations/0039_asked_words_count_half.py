"""What a memory asks counts half of what it states (decision 0121): its questions are a field of
their own in ``lexical`` and its postings (``memory_lexical_weights``), and ``asked_share`` (the
share of its words they hold) scales its cosine in search. The new column's default is a constant
(no table rewrite); the memories whose text holds a '?' (the only ones that change) are scored
again here, the others keep their vectors and postings."""

from django.db import migrations, models

from core.sqlrules import ApplySqlRule

# The memories that hold a question, scored by the new rule (the triggers do it for later writes; an
# UPDATE of these columns alone fires no trigger of the table).
RESCORE = """
UPDATE memory_semanticmemory m SET
    lexical = (SELECT memory_lexical_query(array_agg(w.lexeme), array_agg(w.weight))
               FROM memory_lexical_weights(m.content, m.search) AS w),
    asked_share = memory_asked_share(m.content)
WHERE position('?' IN m.content) > 0;
DELETE FROM memory_lexicalposting p USING memory_semanticmemory m
WHERE p.memory_id = m.id AND position('?' IN m.content) > 0;
INSERT INTO memory_lexicalposting (memory_id, lexeme, impact)
SELECT m.id, w.lexeme, w.weight
FROM memory_semanticmemory m CROSS JOIN LATERAL memory_lexical_weights(m.content, m.search) AS w
WHERE position('?' IN m.content) > 0;
"""

# Back to one field: the vectors and postings of the previous rule (memory_lexical_vector, the
# saturations of ``search``).
UNSCORE = """
UPDATE memory_semanticmemory m SET lexical = memory_lexical_vector(m.search)
WHERE position('?' IN m.content) > 0;
DELETE FROM memory_lexicalposting p USING memory_semanticmemory m
WHERE p.memory_id = m.id AND position('?' IN m.content) > 0;
INSERT INTO memory_lexicalposting (memory_id, lexeme, impact)
SELECT m.id, u.lexeme, memory_bm25_saturation(coalesce(array_length(u.positions, 1), 1), length(m.search))
FROM memory_semanticmemory m CROSS JOIN LATERAL unnest(m.search) AS u
WHERE position('?' IN m.content) > 0;
"""

DROP_WEIGHTS = """
DROP FUNCTION IF EXISTS memory_asked_share(text);
DROP FUNCTION IF EXISTS memory_lexical_weights(text, tsvector);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0038_context_refresh_of_nothing"),
    ]

    operations = [
        migrations.AddField(
            model_name="semanticmemory",
            name="asked_share",
            field=models.FloatField(db_default=0.0, editable=False),
        ),
        ApplySqlRule("memory_lexical_weights", "1198514abc4323de", reverse_sql=DROP_WEIGHTS),
        ApplySqlRule("memory_lexical_set", "1131113fc457ef3e", previous="3c276e7107e57a70"),
        ApplySqlRule("memory_lexical_postings", "e053f02e4f127a88", previous="7054a0a98e679169"),
        migrations.RunSQL(RESCORE, reverse_sql=UNSCORE),
    ]
