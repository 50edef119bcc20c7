"""What the API's path and query parameters accept, in one place: the OpenAPI document shows it
(``api.schema``) and ``ApiView`` checks every request against it before the view runs.

Path parameters are in ``PATH_PARAMETERS`` by name (a test walks the URL patterns: each name used
there must be here). Every path and query parameter refuses NUL characters (PostgreSQL text cannot
hold them); a path parameter with a ``pattern`` (a client-chosen id) refuses any other value; both
are a 400 naming the parameter. A server-assigned id of the wrong form (``memories/not-a-uuid``)
names nothing, and is left to its view's 404.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

NUL_MESSAGE = "NUL characters are not allowed."
# client-chosen ids (the keys of Redis entries and the names of sessions): their longest length
CLIENT_IDS = {"execution_id": 200, "session_id": 200, "key": 200, "field": 200, "agent": 100}


def id_pattern(longest: int) -> str:
    """The pattern of a client-chosen id of at most ``longest`` characters."""
    return f"^[A-Za-z0-9._-]{{1,{longest}}}$"


# name -> its OpenAPI schema (the URL patterns take any segment; this is what the API accepts)
PATH_PARAMETERS: dict[str, dict[str, Any]] = {
    **{name: {"type": "string", "pattern": id_pattern(longest)} for name, longest in CLIENT_IDS.items()},
    "memory_id": {"type": "string", "format": "uuid"},
    "job_id": {"type": "string", "format": "uuid"},
    "fact_id": {"type": "integer", "minimum": 1},
    "step_index": {"type": "integer", "minimum": 0},
    "name": {"type": "string", "minLength": 1, "maxLength": 300},
    "number": {"type": "integer", "minimum": 1},
}
_IDS = {name: re.compile(id_pattern(longest)[1:-1]) for name, longest in CLIENT_IDS.items()}


def check_parameters(path: Mapping[str, Any], query: Mapping[str, list[str]]) -> None:
    """Refuse (DRF ``ValidationError``, a 400 with ``errors`` by parameter name) NUL in any path or
    query parameter, and a path parameter that does not match its pattern. ``path``: the URL's
    keyword arguments; ``query``: each query parameter's values."""
    errors: dict[str, list[str]] = {}
    for name, value in path.items():
        if not isinstance(value, str):
            continue
        if "\x00" in value:
            errors[name] = [NUL_MESSAGE]
        elif name in _IDS and not _IDS[name].fullmatch(value):
            errors[name] = [
                f"{name} must be 1-{CLIENT_IDS[name]} characters of letters, digits, '.', '_' or '-'."
            ]
    for name, values in query.items():
        if "\x00" in name or any("\x00" in value for value in values):
            errors[name] = [NUL_MESSAGE]
    if errors:
        raise serializers.ValidationError(errors)
