"""Database-enforced guarantees that the ORM cannot express.

- The episodic log is append-only: a trigger rejects UPDATE, DELETE and TRUNCATE on events.
- The chain head row exists from the start.
- Each stored vector has the dimension recorded next to it.
- One HNSW index (cosine) per supported dimension, on ``embedding::vector(d)``, partial on that
  dimension and on live rows: the mixed-dimension pattern from pgvector's README.
"""

from django.db import migrations

from core.sqlrules import ApplySqlRule
from memory.semantic.models import INDEXED_DIMENSIONS

DROP_APPEND_ONLY = """
DROP TRIGGER IF EXISTS memory_event_no_truncate ON memory_event;
DROP TRIGGER IF EXISTS memory_event_append_only ON memory_event;
DROP FUNCTION IF EXISTS engram_reject_event_mutation();
"""

HNSW = "\n".join(
    f"CREATE INDEX semantic_hnsw_{d} ON memory_semanticmemory USING hnsw ((embedding::vector({d})) vector_cosine_ops) "
    f"WHERE embedding_dimensions = {d} AND forgotten_at IS NULL;"
    for d in INDEXED_DIMENSIONS
)
DROP_HNSW = "\n".join(f"DROP INDEX IF EXISTS semantic_hnsw_{d};" for d in INDEXED_DIMENSIONS)


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial")]

    operations = [
        ApplySqlRule("engram_reject_event_mutation", "72369164ea7203e3", reverse_sql=DROP_APPEND_ONLY),
        migrations.RunSQL(
            "INSERT INTO memory_chainhead (id, last_seq, last_hash) VALUES (1, 0, repeat('0', 64));",
            "DELETE FROM memory_chainhead WHERE id = 1;",
        ),
        migrations.RunSQL(
            "ALTER TABLE memory_semanticmemory ADD CONSTRAINT semantic_embedding_dims "
            "CHECK (vector_dims(embedding) = embedding_dimensions);",
            "ALTER TABLE memory_semanticmemory DROP CONSTRAINT semantic_embedding_dims;",
        ),
        migrations.RunSQL(HNSW, DROP_HNSW),
    ]
