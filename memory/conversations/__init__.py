"""Conversations: a session's messages taken in one call, appended to the episodic log and turned
into memories (one per turn, or extracted by a language model in a job). Above the layers, beside
consolidation, whose chat client it uses; no layer imports it."""
