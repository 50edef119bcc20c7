"""The memory layers' admins. Each lives in its layer (``memory/<layer>/admin.py``); they are imported
here because Django's admin autodiscovery imports ``<app>.admin`` of each installed app, and the
layers are sub-packages of the one ``memory`` app."""

from memory.checkpoints import admin as checkpoints_admin
from memory.consolidation import admin as consolidation_admin
from memory.episodic import admin as episodic_admin
from memory.knowledge import admin as knowledge_admin
from memory.procedural import admin as procedural_admin
from memory.semantic import admin as semantic_admin
from memory.store import admin as store_admin

__all__ = [
    "checkpoints_admin",
    "consolidation_admin",
    "episodic_admin",
    "knowledge_admin",
    "procedural_admin",
    "semantic_admin",
    "store_admin",
]
