"""Procedural memory: tools (JSON Schema contracts) and versioned skills (validated step lists)."""
