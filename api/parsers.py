"""The API's JSON parser: DRF's, plus clear 400s for input PostgreSQL or Python cannot hold."""

from __future__ import annotations

import json
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from core.canonical_json import MAX_DEPTH


def deeper_than(value: Any, limit: int) -> bool:
    """True if ``value`` nests containers more than ``limit`` levels deep (iterative)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


class StrictJSONParser(JSONParser):
    """Refuse, as a 400 on ``body``: documents nested deeper than ``MAX_DEPTH`` (200) levels, before
    anything recursive touches them (fields then apply the tenant's own, lower limit and name
    themselves), and lone UTF-16 surrogates such as ``"\\ud800"`` anywhere in the document (they
    are not Unicode text, and PostgreSQL cannot store them)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        too_deep = ParseError(f"JSON parse error - the document is nested more than {MAX_DEPTH} levels deep.")
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise too_deep from None
        if deeper_than(data, MAX_DEPTH):
            raise too_deep
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ParseError(
                "JSON parse error - lone surrogate characters (e.g. \\ud800) are not text."
            ) from None
        return data
