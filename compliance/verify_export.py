"""``engram-verify-export FILE``: check an Engram compliance export offline.

Self-contained on purpose: it needs Python 3.11 and the ``cryptography`` package, nothing of Engram,
so an auditor can read it in one sitting and run it anywhere (``python verify_export.py FILE``).

It checks, and reports each failure by name:

1. the Ed25519 signature of ``manifest.json`` (with ``--public-key PEM``, the key downloaded from
   the admin; without it, the key inside the archive, which proves integrity but not origin);
2. the SHA-256, size and line count of every file the manifest lists, and that the archive holds
   nothing else;
3. the chain: every event of the range (``events.jsonl`` with content, ``chain.jsonl`` without)
   recomputed with chain format 2, each linked to its predecessor from ``start_prev_hash`` (the
   genesis, or a signed anchor's row) to ``end_seq``; the body digest (HMAC-SHA256 under the event's
   salt) of every event in scope, except a redacted one (erased: its content is gone for good and
   its stored digest is what the chain covers); that every line is canonical JSON;
4. every anchor's signature, tenant, and that the chain has the anchored hash at its position.

Chain format 2 (Engram's ``memory/episodic/models.py``): ``hash = SHA-256(JCS({session_id,
execution_id, agent_id, actor, role, kind, occurred_at, recorded_at, v: 2, seq, prev_hash,
body_digest}))`` and ``body_digest = HMAC-SHA256(salt, JCS({content, payload}))`` where JCS is the
JSON Canonicalization Scheme (RFC 8785) and ``payload`` the payload's canonical text, a string.
The objects hashed are flat (strings, integers, null) with ASCII keys: for those, RFC 8785 is keys
in sorted order, no whitespace, integers as decimal digits and strings escaped as below (§3.2.2.2).

Memory use is flat: files are read line by line (the two event files are merged by ``seq``).
Exit status 0 when everything verifies, 1 when something does not, 2 for an unreadable archive.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import re
import sys
import tarfile
from collections.abc import Iterator
from typing import IO, Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

GENESIS_HASH = "0" * 64
CHAIN_VERSION = 2
FORMAT = "engram-export/1"
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


_ESCAPED = re.compile(r'[\x00-\x1f"\\]')


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    return _SHORT_ESCAPES.get(ch) or f"\\u{ord(ch):04x}"


def jcs_string(text: str) -> str:
    """An RFC 8785 string (§3.2.2.2): ``"`` and ``\\`` escaped, U+0000-U+001F as the short escapes
    or ``\\u00xx`` (lowercase hex), everything else as itself."""
    return '"' + _ESCAPED.sub(_escape, text) + '"'


def jcs_flat(doc: dict[str, Any]) -> bytes:
    """RFC 8785 of a flat object with ASCII keys and string / integer / boolean / null values.
    Raises ``ValueError`` for anything else (no other shape is hashed by chain format 2)."""
    parts = []
    for key in sorted(doc):
        value = doc[key]
        if not isinstance(key, str) or not key.isascii():
            raise ValueError(f"key {key!r} is not ASCII")
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif value is None:
            text = "null"
        elif isinstance(value, int):
            if abs(value) > 2**53 - 1:
                raise ValueError(f"{key}: integer beyond 2**53 - 1")
            text = str(value)
        elif isinstance(value, str):
            text = jcs_string(value)
        else:
            raise ValueError(f"{key}: {type(value).__name__} is not hashed by the chain")
        parts.append(f"{jcs_string(key)}:{text}")
    return ("{" + ",".join(parts) + "}").encode("utf-8")


HEADER_FIELDS = (
    "session_id",
    "execution_id",
    "agent_id",
    "actor",
    "role",
    "kind",
    "occurred_at",
    "recorded_at",
)


def chain_hash(row: dict[str, Any]) -> str:
    doc = {name: row[name] for name in HEADER_FIELDS}
    doc.update(v=CHAIN_VERSION, seq=row["seq"], prev_hash=row["prev_hash"], body_digest=row["body_digest"])
    return hashlib.sha256(jcs_flat(doc)).hexdigest()


def body_digest(row: dict[str, Any]) -> str:
    message = jcs_flat({"content": row["content"], "payload": row["payload_json"]})
    return hmac.new(bytes.fromhex(row["body_salt"]), message, hashlib.sha256).hexdigest()


class Report:
    """Failures found, each with its kind; ``notes`` say what was checked."""

    def __init__(self, limit: int = 50) -> None:
        self.failures: list[str] = []
        self.notes: list[str] = []
        self.limit = limit
        self.count = 0

    def fail(self, kind: str, message: str) -> None:
        self.count += 1
        if len(self.failures) < self.limit:
            self.failures.append(f"{kind}: {message}")

    @property
    def ok(self) -> bool:
        return self.count == 0


def _lines(stream: IO[bytes] | None) -> Iterator[bytes]:
    if stream is None:
        return
    for line in stream:
        yield line.rstrip(b"\n")


def _parse(line: bytes, where: str, report: Report) -> dict[str, Any] | None:
    try:
        doc = json.loads(line)
    except ValueError:
        report.fail("unreadable", f"{where}: not JSON")
        return None
    if not isinstance(doc, dict):
        report.fail("unreadable", f"{where}: not a JSON object")
        return None
    try:
        if jcs_flat(doc) != line:
            report.fail("not_canonical", f"{where}: the line is not its RFC 8785 form")
    except ValueError as exc:
        report.fail("unreadable", f"{where}: {exc}")
        return None
    return doc


def _merged(archive: tarfile.TarFile, report: Report) -> Iterator[tuple[dict[str, Any], bool]]:
    """Rows of events.jsonl (with content: True) and chain.jsonl (False), merged in seq order."""
    events = _lines(archive.extractfile("events.jsonl"))
    chain = _lines(archive.extractfile("chain.jsonl"))

    def parsed(lines: Iterator[bytes], name: str) -> Iterator[dict[str, Any]]:
        for number, line in enumerate(lines, 1):
            doc = _parse(line, f"{name} line {number}", report)
            if doc is not None:
                yield doc

    left, right = parsed(events, "events.jsonl"), parsed(chain, "chain.jsonl")
    a, b = next(left, None), next(right, None)
    while a is not None or b is not None:
        if b is None or (a is not None and a.get("seq", 0) <= b.get("seq", 0)):
            assert a is not None
            yield a, True
            a = next(left, None)
        else:
            yield b, False
            b = next(right, None)


def verify(path: str, public_key_pem: bytes | None = None) -> Report:
    """Check the archive at ``path`` (see the module docstring); returns the report."""
    report = Report()
    try:
        archive = tarfile.open(path, mode="r:")
    except (tarfile.TarError, OSError) as exc:
        report.fail("unreadable", f"not a tar archive: {exc}")
        return report
    with archive:
        opened = _manifest_open(archive, public_key_pem, report)
        if opened is None:
            return report
        names, key, manifest = opened
        _files_check(archive, names, manifest, report)
        anchored = _anchors_check(archive, key, manifest, report)
        _chain_check(archive, manifest, anchored, report)
    return report


def _manifest_open(
    archive: tarfile.TarFile, public_key_pem: bytes | None, report: Report
) -> tuple[list[str], Ed25519PublicKey, dict[str, Any]] | None:
    """Check 1: the archive's member names, the key (``public_key_pem`` or the archive's own) and
    the manifest, its signature checked; None when the archive cannot be checked further."""
    try:
        names = archive.getnames()
        manifest_bytes = archive.extractfile("manifest.json").read()  # type: ignore[union-attr]
        signature = archive.extractfile("manifest.sig").read().decode().strip()  # type: ignore[union-attr]
        inner_key = archive.extractfile("public_key.pem").read()  # type: ignore[union-attr]
    except (KeyError, AttributeError, tarfile.TarError, UnicodeDecodeError) as exc:
        report.fail("unreadable", f"the manifest, its signature or the public key is missing: {exc}")
        return None
    try:
        key = serialization.load_pem_public_key(public_key_pem or inner_key)
    except ValueError as exc:
        report.fail("bad_key", f"the public key cannot be read: {exc}")
        return None
    if not isinstance(key, Ed25519PublicKey):
        report.fail("bad_key", "the public key is not an Ed25519 key")
        return None
    if public_key_pem is None:
        report.notes.append(
            "signatures checked with the key inside the archive: pass --public-key with the key "
            "from Engram's admin to know the archive comes from Engram"
        )
    try:
        key.verify(bytes.fromhex(signature), manifest_bytes)
    except (InvalidSignature, ValueError):
        report.fail(
            "manifest_signature",
            "the manifest's signature does not verify: it was altered or not signed by this key",
        )
    try:
        manifest = json.loads(manifest_bytes)
    except ValueError:
        report.fail("unreadable", "manifest.json is not JSON")
        return None
    if manifest.get("format") != FORMAT:
        report.fail("format", f"unknown format {manifest.get('format')!r}")
        return None
    return names, key, manifest


def _files_check(
    archive: tarfile.TarFile, names: list[str], manifest: dict[str, Any], report: Report
) -> None:
    """Check 2: every file the manifest lists, by SHA-256, size and lines; nothing else inside."""
    listed = manifest.get("files", {})
    for name in names:
        if name not in listed and name not in ("manifest.json", "manifest.sig"):
            report.fail("unlisted_file", f"{name} is in the archive but not in the manifest")
    for name, expected in listed.items():
        stream = archive.extractfile(name) if name in names else None
        if stream is None:
            report.fail("missing_file", f"{name} is listed in the manifest but missing")
            continue
        digest, size, lines = hashlib.sha256(), 0, 0
        while chunk := stream.read(1024 * 1024):
            digest.update(chunk)
            size += len(chunk)
            lines += chunk.count(b"\n")
        if digest.hexdigest() != expected.get("sha256"):
            report.fail("file_hash", f"{name}: its SHA-256 is not the manifest's (the file was altered)")
        if size != expected.get("bytes") or lines != expected.get("lines"):
            report.fail(
                "file_size",
                f"{name}: {size} bytes / {lines} lines, the manifest says {expected.get('bytes')} / {expected.get('lines')}",
            )
    report.notes.append(f"{len(listed)} files hashed")


def _anchors_check(
    archive: tarfile.TarFile, key: Ed25519PublicKey, manifest: dict[str, Any], report: Report
) -> dict[int, str]:
    """Check 4, first half: every anchor's signature and tenant, and that the manifest's anchors are
    all there; returns the anchored hash per seq."""
    tenant = manifest.get("tenant")
    anchored: dict[int, str] = {}
    for number, line in enumerate(_lines(archive.extractfile("anchors.jsonl")), 1):
        doc = _parse(line, f"anchors.jsonl line {number}", report)
        if doc is None:
            continue
        try:
            key.verify(bytes.fromhex(doc["signature"]), doc["statement"].encode())
            statement = json.loads(doc["statement"])
        except (InvalidSignature, ValueError, KeyError, AttributeError):
            report.fail("anchor_signature", f"anchors.jsonl line {number}: the signature does not verify")
            continue
        if statement.get("tenant") != tenant:
            report.fail(
                "anchor_tenant",
                f"the anchor of #{statement.get('seq')} is for tenant {statement.get('tenant')!r}",
            )
            continue
        anchored[int(statement["seq"])] = str(statement["hash"])
    for seq in manifest.get("anchors", []):
        if seq not in anchored:
            report.fail("anchor_missing", f"the manifest lists an anchor of #{seq} that the archive lacks")
    return anchored


def _chain_check(
    archive: tarfile.TarFile, manifest: dict[str, Any], anchored: dict[int, str], report: Report
) -> None:
    """Check 3 (and 4's second half): every event of the range recomputed and linked in seq order,
    each anchored one the event its anchor signed; the range and the count as the manifest says."""
    chain = manifest.get("chain", {})
    expected_seq, expected_prev = chain.get("start_seq", 1), chain.get("start_prev_hash", GENESIS_HASH)
    if expected_seq == 1 and expected_prev != GENESIS_HASH:
        report.fail("link_broken", "the chain starts at #1 but not from the genesis hash")
    in_scope = rows = legacy = 0
    for row, with_body in _merged(archive, report):
        rows += 1
        seq = row.get("seq")
        if seq != expected_seq:
            report.fail(
                "gap", f"expected event #{expected_seq}, found #{seq}: events are missing or out of order"
            )
        if row.get("prev_hash") != expected_prev:
            report.fail("link_broken", f"event #{seq} does not link to the event before it")
        if row.get("hash_version") == 1:
            legacy += 1  # format 1 (before chain format 2) is taken as linked, not recomputed
        else:
            _event_check(row, with_body, report)
        if seq in anchored and anchored[seq] != row.get("hash"):
            report.fail("anchor_mismatch", f"event #{seq} is not the event its anchor signed")
        in_scope += with_body
        expected_seq, expected_prev = (seq or 0) + 1, row.get("hash")
    if rows and expected_seq - 1 != chain.get("end_seq"):
        report.fail(
            "truncated",
            f"the chain range ends at #{expected_seq - 1}, the manifest says #{chain.get('end_seq')}",
        )
    if in_scope != manifest.get("counts", {}).get("events"):
        report.fail(
            "count",
            f"{in_scope} events in scope, the manifest says {manifest.get('counts', {}).get('events')}",
        )
    report.notes.append(
        f"{in_scope} events in scope, {rows} links from #{chain.get('start_seq')} to #{chain.get('end_seq')} "
        f"recomputed ({legacy} format-1 events taken as linked), {len(anchored)} anchors verified"
    )


def _event_check(row: dict[str, Any], with_body: bool, report: Report) -> None:
    """One event of chain format 2: its hash over its fields, and (``with_body``) its body digest."""
    seq = row.get("seq")
    try:
        if chain_hash(row) != row.get("hash"):
            report.fail("fields_altered", f"event #{seq}: its fields do not match its hash")
        # a redacted event (an erasure) has no body left: its digest stands for it
        if with_body and not row.get("redacted") and body_digest(row) != row.get("body_digest"):
            report.fail(
                "content_altered",
                f"event #{seq}: its content or payload does not match its body digest",
            )
    except (KeyError, ValueError, TypeError) as exc:
        report.fail("unreadable", f"event #{seq}: {exc}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="engram-verify-export", description="Verify an Engram compliance export offline."
    )
    parser.add_argument("file", help="the export archive (.tar)")
    parser.add_argument(
        "--public-key", help="the signing key's public half (PEM), as downloaded from Engram's admin"
    )
    args = parser.parse_args(argv)
    pem = None
    if args.public_key:
        with open(args.public_key, "rb") as handle:
            pem = handle.read()
    report = verify(args.file, pem)
    for note in report.notes:
        print(f"note: {note}")
    if report.ok:
        print(f"OK: {args.file} verifies")
        return 0
    for failure in report.failures:
        print(f"FAIL {failure}")
    if report.count > len(report.failures):
        print(f"... and {report.count - len(report.failures)} more")
    unreadable = all(f.startswith("unreadable") for f in report.failures)
    return 2 if unreadable and report.count == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
