"""A semantic memory's embedding stays in its heap row (``toast_tuple_target`` 4080, issue 16).

PostgreSQL moves a row's largest values out of line into the TOAST table once the row passes
``toast_tuple_target`` (by default 2032 bytes, a quarter of a page). A memory with a 384-d embedding
(1,540 bytes) and its other columns is about 2,100 bytes, so every embedding lived in TOAST, and the
hybrid search read it back once per candidate (the exact distance of a lexical candidate, the vector
arm's select list): ~200 TOAST index lookups per search at 100k memories, about a third of the
statement's buffer reads. With the target at 4080 (half a page) rows up to about 768-d embeddings
stay whole; larger ones are still moved out of line, as before.

The storage parameter applies to rows written from now on. Rows written before keep their
embeddings in TOAST until the table is rewritten: ``VACUUM FULL memory_semanticmemory`` in each
tenant's schema (it holds an exclusive lock on the table while it runs, so it is an operator's
choice for a maintenance window, not this migration's).
"""

from django.db import migrations

# bytes: half of an 8 KiB page (PostgreSQL's range is 128-8160)
TOAST_TUPLE_TARGET = 4080


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0022_fact_page_indexes_context_refresh"),
    ]

    operations = [
        migrations.RunSQL(
            f"ALTER TABLE memory_semanticmemory SET (toast_tuple_target = {TOAST_TUPLE_TARGET})",
            "ALTER TABLE memory_semanticmemory RESET (toast_tuple_target)",
        ),
    ]
