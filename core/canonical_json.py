"""JSON values Engram can store, hash and return unchanged: checks and RFC 8785 canonical text.

Numbers in JSON are IEEE-754 doubles (RFC 8259 §6, I-JSON RFC 7493 §2.2), and the canonical form
of a value is the JSON Canonicalization Scheme (RFC 8785, through the ``rfc8785`` library): keys
sorted by UTF-16 code units, no whitespace, numbers in their shortest round-trip form (``1e20`` →
``100000000000000000000``, ``-0.0`` → ``0``, ``1.5e300`` → ``1.5e+300``). Canonical text is a fixed
point: parsing it and canonicalising again gives the same text, so what is hashed is what is stored
and what the API returns.

The checks walk values iteratively (a deep value must never exhaust Python's stack) and name the
JSON path of the first offending value (``payload.a[1].b``).
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

import rfc8785

from core.errors import InvalidInput

SAFE_INTEGER = 2**53 - 1  # the largest n with every integer in [-n, n] exactly a double
# A hard cap for every JSON value anywhere (tenants choose a lower limit for request bodies): the
# standard library's encoder and decoder, and rfc8785, recurse once per level.
MAX_DEPTH = 200


def contains_nul(value: Any) -> bool:
    """True if a JSON value holds a NUL character in any string or key (PostgreSQL jsonb refuses
    them). Iterative: a deep value cannot exhaust the stack."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def _path(parents: dict[int, tuple[int | None, str]], node: int | None, root: str) -> str:
    parts: list[str] = []
    while node is not None:
        parent, step = parents[node]
        parts.append(step)
        node = parent
    parts.reverse()
    if len(parts) > 10:  # a path into a deep value: its start and its end are what locate it
        parts = [*parts[:5], "…", *parts[-3:]]
    return root + "".join(parts)


def _step(key: str | int) -> str:
    return f"[{key}]" if isinstance(key, int) else f".{key}"


def _exact_double(value: int) -> bool:
    """True when ``value``'s decimal digits are the canonical text of the double it denotes, so it
    survives as that double without a digit changing (``10**20`` yes, ``2**64 + 1`` no)."""
    try:
        return rfc8785.dumps(float(value)).decode() == str(value)
    except (OverflowError, rfc8785.CanonicalizationError):
        return False


def json_check(value: Any, *, root: str, max_depth: int = MAX_DEPTH, numbers: bool = False) -> bool:
    """Check a parsed JSON value; return whether it holds an integer to store as a double.

    Refuses (``InvalidInput`` with ``field=root`` and the JSON path in the message): nesting deeper
    than ``max_depth`` levels (the value itself is level 1), NUL characters in strings or keys
    (PostgreSQL text cannot hold them), keys that are not strings, and, with ``numbers``, integers
    outside ±(2**53 - 1) whose digits a double cannot keep (RFC 8785 numbers are doubles: send such
    ids as strings). ``max_depth`` is capped at ``MAX_DEPTH``.
    """
    limit = min(max_depth, MAX_DEPTH)
    parents: dict[int, tuple[int | None, str]] = {}
    # each entry: a value, its level, and the node of its path in ``parents`` (None: the root)
    stack: list[tuple[Any, int, int | None]] = [(value, 1, None)]
    converts = False
    while stack:
        item, depth, here = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise InvalidInput(
                    f"{_path(parents, here, root)}: NUL characters are not allowed.", field=root
                )
            continue
        if isinstance(item, bool) or item is None or isinstance(item, float):
            continue
        if isinstance(item, int):
            if numbers and abs(item) > SAFE_INTEGER:
                if not _exact_double(item):
                    where = _path(parents, here, root)
                    raise InvalidInput(
                        f"{where}: {item} cannot be kept exactly (JSON numbers are doubles, exact for "
                        f"integers up to ±{SAFE_INTEGER}); send it as a string.",
                        field=root,
                    )
                converts = True
            continue
        if depth > limit:
            where = _path(parents, here, root)
            raise InvalidInput(f"{where}: nested deeper than {limit} levels.", field=root)
        if isinstance(item, dict):
            children: Any = item.items()
        elif isinstance(item, list | tuple):
            children = enumerate(item)
        else:
            raise InvalidInput(f"{_path(parents, here, root)}: not a JSON value.", field=root)
        for key, child in children:
            if isinstance(item, dict):
                if not isinstance(key, str):
                    raise InvalidInput(f"{_path(parents, here, root)}: keys must be strings.", field=root)
                if "\x00" in key:
                    raise InvalidInput(
                        f"{_path(parents, here, root)}: NUL characters are not allowed in keys.", field=root
                    )
            if isinstance(child, dict | list | tuple | str) or (
                numbers and isinstance(child, int) and not isinstance(child, bool)
            ):
                node = len(parents)
                parents[node] = (here, _step(key))
                stack.append((child, depth + 1, node))
    return converts


def _as_doubles(value: Any) -> Any:
    """A copy of ``value`` with integers beyond ±(2**53 - 1) as floats (checked by ``json_check``)."""
    value = copy.deepcopy(value)
    stack = [value]
    while stack:
        item = stack.pop()
        pairs = item.items() if isinstance(item, dict) else enumerate(item)
        for key, child in list(pairs):
            if isinstance(child, int) and not isinstance(child, bool) and abs(child) > SAFE_INTEGER:
                item[key] = float(child)
            elif isinstance(child, dict | list):
                stack.append(child)
    return value


def canonical_json(value: Any, *, root: str, max_depth: int = MAX_DEPTH) -> str:
    """The RFC 8785 canonical text of a JSON value (``str``; encode as UTF-8 to hash it).

    Raises ``InvalidInput`` (``field=root``) as ``json_check`` with ``numbers=True`` does, and for
    strings that are not Unicode text (lone surrogates).
    """
    if json_check(value, root=root, max_depth=max_depth, numbers=True):
        value = _as_doubles(value)
    try:
        return rfc8785.dumps(value).decode("utf-8")
    except (rfc8785.CanonicalizationError, UnicodeEncodeError) as exc:
        raise InvalidInput(f"{root}: not canonical JSON ({exc}).", field=root) from None


_encode_string = json.encoder.encode_basestring  # C-accelerated


@functools.lru_cache(maxsize=256)
def _key_order(keys: tuple[str, ...]) -> tuple[tuple[str, str], ...] | None:
    """``(key, '"key":')`` in RFC 8785 order for a set of ASCII keys (None when one is not ASCII):
    the chain and the exports hash objects of a few fixed shapes, so this is computed once each."""
    if not all(isinstance(key, str) and key.isascii() for key in keys):
        return None
    return tuple((key, _encode_string(key) + ":") for key in sorted(keys))


def canonical_flat(doc: dict[str, Any]) -> bytes:
    """The RFC 8785 text (UTF-8 bytes) of ``doc``, byte for byte what ``rfc8785.dumps`` gives, by a
    fast path for the flat objects the hash chain hashes (keys ASCII; values strings, integers within
    ±(2**53 - 1), booleans or null): the chain verifier and the exports compute it for every event
    (decision 0044 has the figures).

    Why it is the same text: RFC 8785 §3.2.2.2 writes strings as ECMAScript's ``JSON.stringify``
    does, escaping only ``"``, ``\\`` and U+0000-U+001F (``\\b \\t \\n \\f \\r`` short, the others as
    ``\\u00xx`` in lowercase hex), which is exactly what ``json.encoder.encode_basestring`` does;
    integers in the safe range print as their decimal digits; ASCII keys sort the same by UTF-16
    code units (§3.2.3) as by code points. Anything else (floats, nested values, other keys) goes
    to ``rfc8785.dumps``. Raises ``UnicodeEncodeError`` for a lone surrogate, as ``rfc8785`` raises.
    """
    order = _key_order(tuple(doc))
    if order is None:
        return rfc8785.dumps(doc)
    parts = []
    for key, encoded in order:
        value = doc[key]
        if value.__class__ is str:
            text = _encode_string(value)
        elif value is None:
            text = "null"
        elif value is True:
            text = "true"
        elif value is False:
            text = "false"
        elif isinstance(value, int) and -SAFE_INTEGER <= value <= SAFE_INTEGER:
            text = str(value)
        elif isinstance(value, str):
            text = _encode_string(value)
        else:
            return rfc8785.dumps(doc)
        parts.append(encoded + text)
    return ("{" + ",".join(parts) + "}").encode("utf-8")
