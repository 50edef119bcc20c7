"""``canonical_flat`` (the chain's fast path) and the offline verifier's own RFC 8785 give exactly
the bytes of the ``rfc8785`` library for every string the chain hashes, and fall back or refuse
for anything else."""

from __future__ import annotations

import random

import pytest
import rfc8785

from compliance.verify_export import jcs_flat
from core.canonical_json import canonical_flat

TRICKY = [
    "".join(chr(i) for i in range(0x80)),  # every control character, quote and backslash
    "é\u2028\u2029🧠\u007f\ufeff\u202e",  # line separators, DEL, BOM, a bidi override, astral
    'say "hi" \\ bye',
    "",
    "記憶は大切です",
]


def samples() -> list[dict[str, object]]:
    rng = random.Random(8785)
    docs: list[dict[str, object]] = [
        {"content": text, "payload": text[::-1], "seq": 2**53 - 1, "none": None, "yes": True, "no": False}
        for text in TRICKY
    ]
    alphabet = [chr(c) for c in (*range(0, 0x30), 0x7F, 0xE9, 0x2028, 0xFEFF, 0x1F9E0)]
    for _ in range(300):
        docs.append(
            {
                "b": "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))),
                "a": rng.randint(-(2**53) + 1, 2**53 - 1),
                "execution_id": None,
            }
        )
    return docs


@pytest.mark.parametrize("doc", samples())
def test_both_give_rfc8785s_bytes(doc: dict[str, object]) -> None:
    expected = rfc8785.dumps(doc)
    assert canonical_flat(doc) == expected
    assert jcs_flat(doc) == expected


def test_other_values_fall_back_to_the_library_or_are_refused() -> None:
    doc = {"x": 1.5, "n": {"nested": [1, 2]}, "é": "non-ASCII key"}
    assert canonical_flat(doc) == rfc8785.dumps(doc)
    with pytest.raises(ValueError):
        jcs_flat(doc)
    with pytest.raises(rfc8785.IntegerDomainError):
        canonical_flat({"big": 2**60})
