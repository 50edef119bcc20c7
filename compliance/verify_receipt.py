"""``engram-verify-receipt FILE --public-key PEM``: check an Engram erasure receipt offline.

Self-contained on purpose, like ``verify_export.py``: it needs Python 3.11 and the ``cryptography``
package, nothing of Engram (``python verify_receipt.py FILE --public-key PEM`` works anywhere).

``FILE`` is the receipt as the admin's erasure page downloads it: ``{"receipt": <the RFC 8785
text signed>, "signature": <Ed25519, hex>, "key_id": <SHA-256 of the key's raw bytes, hex>}``.
It checks, and reports each failure by name:

1. the Ed25519 signature of the receipt text under the public key downloaded from the admin
   (``signature``), and that the key is the one the file and the receipt name (``key``);
2. that the text is the canonical form (RFC 8785: sorted keys, no whitespace) of a receipt
   document (``format``): type ``engram-erasure-receipt``, version 1;
3. that four eyes decided it: an approver other than the requester (``four-eyes``);
4. that the erasure's own verification pass found nothing left (``verification``);
5. with ``--erasure-id`` or ``--tenant``, that it is the receipt of that erasure, of that tenant
   (``scope``).

Then it prints what the receipt covers: the target (kind and keyed digest: the identifier itself is
erased), who asked and approved and when, what each store lost, and what lingers and until when.
Exit status 0 when everything verifies, 1 when something does not, 2 for an unreadable file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

RECEIPT_TYPE = "engram-erasure-receipt"
RECEIPT_VERSION = 1


@dataclass
class Result:
    """What the check found: ``failures`` (``"<kind>: <message>"``, empty when it verifies),
    ``covers`` (lines saying what the receipt covers) and the parsed ``receipt`` (None: unreadable)."""

    failures: list[str] = field(default_factory=list)
    covers: list[str] = field(default_factory=list)
    receipt: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return not self.failures


def canonical(document: Any) -> str:
    """RFC 8785 text of ``document`` as receipts hold it (objects with ASCII keys, strings, integers,
    booleans, null; no floats): sorted keys, no whitespace, only the required escapes."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def key_id_of(key: Ed25519PublicKey) -> str:
    """SHA-256 (hex) of the key's 32 raw bytes: the ``key_id`` receipts name."""
    return hashlib.sha256(
        key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    ).hexdigest()


def _read(raw: bytes, result: Result) -> tuple[str, str, str] | None:
    try:
        wrapper = json.loads(raw)
        text, signature, key_id = wrapper["receipt"], wrapper["signature"], wrapper["key_id"]
        if not all(isinstance(value, str) for value in (text, signature, key_id)):
            raise TypeError("receipt, signature and key_id must be strings")
        result.receipt = json.loads(text)
    except (ValueError, KeyError, TypeError) as error:
        result.failures.append(f"unreadable: not a receipt download ({error})")
        return None
    if not isinstance(result.receipt, dict):
        result.failures.append("unreadable: the receipt is not a JSON object")
        result.receipt = None
        return None
    return text, signature, key_id


def _signature_check(text: str, signature: str, key_id: str, key: Ed25519PublicKey, result: Result) -> None:
    receipt = result.receipt or {}
    expected = key_id_of(key)
    if key_id != expected or receipt.get("key_id") != expected:
        result.failures.append(
            f"key: the receipt names key {receipt.get('key_id')!r} (file: {key_id!r}), the public key given is {expected}"
        )
    try:
        key.verify(bytes.fromhex(signature), text.encode())
    except (InvalidSignature, ValueError):
        result.failures.append("signature: the Ed25519 signature does not verify over the receipt text")


def _content_check(text: str, result: Result, erasure_id: str | None, tenant: str | None) -> None:
    receipt = result.receipt or {}
    if canonical(receipt) != text:
        result.failures.append("format: the receipt text is not in its canonical (RFC 8785) form")
    if receipt.get("type") != RECEIPT_TYPE or receipt.get("v") != RECEIPT_VERSION:
        result.failures.append(
            f"format: type {receipt.get('type')!r} v{receipt.get('v')!r}, not {RECEIPT_TYPE} v1"
        )
    if not receipt.get("approved_by") or receipt.get("approved_by") == receipt.get("requested_by"):
        result.failures.append(
            f"four-eyes: requested by {receipt.get('requested_by')!r}, approved by {receipt.get('approved_by')!r}"
        )
    verification = receipt.get("verification")
    if not isinstance(verification, dict) or verification.get("clean") is not True:
        result.failures.append("verification: the erasure's own check did not find every store clean")
    if erasure_id is not None and receipt.get("erasure_id") != erasure_id:
        result.failures.append(
            f"scope: the receipt is of erasure {receipt.get('erasure_id')!r}, not {erasure_id!r}"
        )
    if tenant is not None and receipt.get("tenant") != tenant:
        result.failures.append(f"scope: the receipt is of tenant {receipt.get('tenant')!r}, not {tenant!r}")


def _counts(stores: dict[str, Any]) -> list[str]:
    """``store: name n, ...`` per store, from each store's integer counts (lists are ids: their length)."""
    lines = []
    for store, found in sorted(stores.items()):
        if not isinstance(found, dict):
            continue
        parts = [
            f"{name} {value if isinstance(value, int) else len(value)}"
            for name, value in sorted(found.items())
            if isinstance(value, int | list)
            and not isinstance(value, bool)
            and not name.endswith(("_ids", "_seqs", "_digests", "keys"))
        ]
        if parts:
            lines.append(f"  {store}: {', '.join(parts)}")
    return lines


def _covers(receipt: dict[str, Any]) -> list[str]:
    target = receipt.get("target") or {}
    lines = [
        f"erasure {receipt.get('erasure_id')} of tenant {receipt.get('tenant')}",
        f"target: {target.get('kind')} with keyed digest {target.get('value_digest')}",
        f"legal basis: {receipt.get('legal_basis')}",
        f"requested by {receipt.get('requested_by')} at {receipt.get('requested_at')}",
        f"approved by {receipt.get('approved_by')} at {receipt.get('approved_at')}",
        f"executed at {receipt.get('executed_at')}",
        "removed:",
        *_counts(receipt.get("stores") or {}),
    ]
    for item in receipt.get("lingering") or []:
        if isinstance(item, dict):
            lines.append(f"lingering in {item.get('store')}: {item.get('holds')}, until {item.get('until')}")
    return lines


def verify(
    raw: bytes, public_key_pem: bytes, *, erasure_id: str | None = None, tenant: str | None = None
) -> Result:
    """Check the receipt download ``raw`` against the public key ``public_key_pem`` (and, when given,
    that it is of ``erasure_id`` and ``tenant``). Raises ``ValueError`` for a key that is not an
    Ed25519 public key in PEM."""
    key = serialization.load_pem_public_key(public_key_pem)
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("the public key is not an Ed25519 key")
    result = Result()
    parts = _read(raw, result)
    if parts is None:
        return result
    text, signature, key_id = parts
    _signature_check(text, signature, key_id, key, result)
    _content_check(text, result, erasure_id, tenant)
    result.covers = _covers(result.receipt or {})
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="engram-verify-receipt", description="Verify an Engram erasure receipt offline."
    )
    parser.add_argument("file", help="the receipt as downloaded from the erasure's page (.json)")
    parser.add_argument(
        "--public-key",
        required=True,
        help="the signing key's public half (PEM), as downloaded from Engram's admin",
    )
    parser.add_argument("--erasure-id", help="fail unless the receipt is of this erasure request")
    parser.add_argument("--tenant", help="fail unless the receipt is of this tenant (its schema name)")
    args = parser.parse_args(argv)
    try:
        with open(args.file, "rb") as handle:
            raw = handle.read()
        with open(args.public_key, "rb") as handle:
            result = verify(raw, handle.read(), erasure_id=args.erasure_id, tenant=args.tenant)
    except (OSError, ValueError) as error:
        print(f"FAIL unreadable: {error}")
        return 2
    for line in result.covers:
        print(line)
    if result.ok:
        print(f"OK: {args.file} verifies")
        return 0
    for failure in result.failures:
        print(f"FAIL {failure}")
    return 2 if result.receipt is None else 1


if __name__ == "__main__":
    sys.exit(main())
