"""Drop the GIN index on ``memory_semanticmemory.search``: nothing has read it since 0014 (issue 16).

The full-text arm of hybrid search used ``search @@ query`` over this index until migration 0014
moved lexical candidates to ``memory_lexicalposting`` (BM25 impact order). Since then the tsvector
is read only row by row (the triggers that build ``lexical``, the postings and ``MemoryContext``),
never through the index, yet every write still inserted each of its lexemes into it, and a write
that filled the index's pending list paid for merging all of it. Measured before dropping it
(``EXPLAIN``-free timing of one 500-row batch insert, client vectors, rolled back and repeated):
225 against 207 ms at load 1.

The generated ``search`` column stays: the triggers read it.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0023_semantic_vectors_in_line"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="semanticmemory", name="semantic_search_gin"),
    ]
