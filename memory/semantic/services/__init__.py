"""Writes to semantic memory, one module per topic (callers import the module they need):

- ``writes``: the write pipeline (``memory_create``, ``memories_create``);
- ``reinforce``: one more sighting of a memory a write duplicates (``memories_reinforce``);
- ``supersede``: updates, a newer memory replacing an older one (``memories_supersede``);
- ``pending``: the async embedding queue's drain (``pending_embed``);
- ``duplicates``: the exact and near duplicate rules;
- ``clocks``: the access clocks (touch, the buffered recalls' flush, restore);
- ``recall``: hybrid recall with MMR and its clock restart (``memory_search``);
- ``summaries``: the summary tree's memories (``summaries_put``);
- ``erase``: forget (kept for audit) and erase (for good).
"""
