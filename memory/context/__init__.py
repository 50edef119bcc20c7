"""Context assembly: what enters an agent's prompt for the current step, across the layers, within a token
budget (above the layers, like consolidation: no layer imports it)."""
