"""Models of every memory layer; each lives in its layer's sub-package."""

from memory.checkpoints.models import Checkpoint, CheckpointBlob, CheckpointWrite
from memory.consolidation.models import ConsolidationRun, Promotion, SummaryNode
from memory.conversations.models import ExtractionJob
from memory.episodic.models import ChainHead, Event, EventKind, EventRole
from memory.knowledge.models import (
    Contradiction,
    Entity,
    Fact,
    FactProvenance,
    GraphOutbox,
    Predicate,
)
from memory.procedural.models import Skill, SkillRun, SkillRunStats, SkillVersion, Tool, ToolVersion
from memory.semantic.models import MemoryScope, MemoryType, SemanticMemory
from memory.store.models import StoreItem

__all__ = [
    "ChainHead",
    "Checkpoint",
    "CheckpointBlob",
    "CheckpointWrite",
    "ConsolidationRun",
    "Contradiction",
    "Entity",
    "Event",
    "EventKind",
    "EventRole",
    "ExtractionJob",
    "Fact",
    "FactProvenance",
    "GraphOutbox",
    "MemoryScope",
    "MemoryType",
    "Predicate",
    "Promotion",
    "SemanticMemory",
    "Skill",
    "SkillRun",
    "SkillRunStats",
    "SkillVersion",
    "StoreItem",
    "SummaryNode",
    "Tool",
    "ToolVersion",
]
