"""The API's JSON parser: DRF's, plus clear 400s for input PostgreSQL or Python cannot hold."""

from __future__ import annotations

import json
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class StrictJSONParser(JSONParser):
    """Refuse, as a 400 on ``body``: nesting deeper than Python's recursion limit (about 1,000
    levels) and lone UTF-16 surrogates such as ``"\\ud800"`` anywhere in the document (they are not
    Unicode text, and PostgreSQL cannot store them)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except RecursionError:
            raise ParseError("JSON parse error - the document is nested too deeply.") from None
        except UnicodeEncodeError:
            raise ParseError(
                "JSON parse error - lone surrogate characters (e.g. \\ud800) are not text."
            ) from None
        return data
