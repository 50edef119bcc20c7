"""Consolidation: jobs above the memory layers (forgetting curve and archiving, promotion of memories
to facts, the episodic summary tree). It reads episodic and semantic memory and writes semantic
memory and facts through their services; no layer imports it."""
