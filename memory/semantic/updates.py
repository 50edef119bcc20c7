"""What makes a near memory that says something else an update of it: ``is_update``."""

from __future__ import annotations

from .differences import Difference, differences, features


def _first_name(text: str) -> str | None:
    names = features(text).names
    if not names:
        return None
    folded = text.casefold()
    return min(names, key=lambda n: (folded.find(n) if n in folded else len(folded), n))


def is_update(new: str, old: str) -> bool:
    """Whether ``new`` restates ``old`` with something changed that matters (``differences``) about
    the same thing, rather than a statement about someone else (their first names differ)."""
    found = differences(new, old)
    if not found:
        return False
    if Difference.NAME in found:
        a, b = _first_name(new), _first_name(old)
        if a is not None and b is not None and a != b:
            return False
    return True
