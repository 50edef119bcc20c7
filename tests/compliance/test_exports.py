"""Exports: a session's archive verifies offline with the standalone verifier (the module and the
``engram-verify-export`` console script), and stops verifying when one byte changes; the export is
logged in the trail with its hash; the other tenant's events never enter it."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from django_tenants.utils import tenant_context

from compliance import services, signing, verify_export
from compliance.models import Export, ExportStatus
from memory.episodic.models import Event, EventKind
from memory.knowledge import services as knowledge
from memory.knowledge.services import FactData, FactObject
from tests.compliance.conftest import append, behind_the_triggers
from tests.factories import Caller


def export_of(**scope: object) -> Export:
    export = services.export_request(username="officer", **scope)  # type: ignore[arg-type]
    return services.export_run(export_id=str(export.pk))


@pytest.fixture
def trail(alice: Caller, bob: Caller, mallory: Caller) -> Caller:
    """Session s-audit interleaved with other sessions, a fact and a retraction in it, an anchor in
    the middle, and tenant beta writing the same session id."""
    with tenant_context(alice.tenant):
        append(alice.agent, 3, session_id="s-other")
        append(alice.agent, 4, session_id="s-audit")
        services.anchor_head()
        append(bob.agent, 3, session_id="s-other", start=10)
        fact = knowledge.fact_assert(
            agent=alice.agent,
            data=FactData(
                subject="Ana", predicate="lives_in", object=FactObject(entity="Porto"), session_id="s-audit"
            ),
        ).fact
        knowledge.fact_retract(agent=bob.agent, fact_id=fact.pk, reason="moved", may_curate=True)
        append(bob.agent, 2, session_id="s-audit", start=20)
        append(alice.agent, 2, session_id="s-later", start=30)
        services.anchor_head()
    with tenant_context(mallory.tenant):
        append(mallory.agent, 5, session_id="s-audit", start=100)
    return alice


def members(path: str) -> dict[str, bytes]:
    with tarfile.open(path) as archive:
        return {m.name: archive.extractfile(m).read() for m in archive.getmembers()}  # type: ignore[union-attr]


def test_a_session_export_verifies_offline(trail: Caller, tmp_path: Path) -> None:
    with tenant_context(trail.tenant):
        export = export_of(scope="session", session_id="s-audit")
        expected = list(
            Event.objects.filter(session_id="s-audit").order_by("seq").values_list("seq", flat=True)
        )
        pem = signing.public_key_pem()
    assert export.status == ExportStatus.DONE, export.error
    files = members(export.path)
    events = [json.loads(line) for line in files["events.jsonl"].splitlines()]
    assert [e["seq"] for e in events] == expected and len(expected) == 7  # 4 + retraction + 2
    assert {e["session_id"] for e in events} == {"s-audit"}
    assert not any("turn 10" in e["content"] for e in events)  # beta's events are beta's
    manifest = json.loads(files["manifest.json"])
    assert manifest["counts"]["events"] == 7 and manifest["tenant"] == "alpha"
    assert manifest["chain"]["anchored_start"] and manifest["chain"]["anchored_end"]
    assert len(manifest["anchors"]) == 2
    facts = [json.loads(line) for line in files["objects/facts.jsonl"].splitlines()]
    assert [(f["subject"], f["status"]) for f in facts] == [("Ana", "retracted")]

    key = tmp_path / "engram.pub.pem"
    key.write_bytes(pem)
    report = verify_export.verify(export.path, key.read_bytes())
    assert report.ok, report.failures
    # the console script, as an auditor runs it, with nothing of Engram imported
    script = Path(sys.executable).with_name("engram-verify-export")
    done = subprocess.run(
        [str(script), export.path, "--public-key", str(key)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK:" in done.stdout and "7 events in scope" in done.stdout


def test_one_changed_byte_fails_verification(trail: Caller, tmp_path: Path) -> None:
    with tenant_context(trail.tenant):
        export = export_of(scope="session", session_id="s-audit")
    data = bytearray(Path(export.path).read_bytes())
    offset = data.index(b"turn 1")  # inside events.jsonl
    data[offset + 5] ^= 0x01  # "turn 1" -> "turn 0"
    forged = tmp_path / "forged.tar"
    forged.write_bytes(bytes(data))
    report = verify_export.verify(str(forged))
    assert not report.ok
    assert any(f.startswith("file_hash: events.jsonl") for f in report.failures)
    assert any(f.startswith("content_altered") for f in report.failures)
    done = subprocess.run(
        [sys.executable, verify_export.__file__, str(forged)], capture_output=True, text=True
    )
    assert done.returncode == 1 and "FAIL file_hash" in done.stdout


def test_a_manifest_signed_by_another_key_fails(trail: Caller, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    with tenant_context(trail.tenant):
        export = export_of(scope="all")
    other = (
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    report = verify_export.verify(export.path, other)
    assert any(f.startswith("manifest_signature") for f in report.failures)
    assert verify_export.verify(export.path).ok  # with the archive's own key it is intact


def test_the_export_is_in_the_trail_with_its_hash(trail: Caller) -> None:
    with tenant_context(trail.tenant):
        export = export_of(scope="agent", agent_name="bob")
        decision = Event.objects.filter(kind=EventKind.DECISION, payload_index__action="export").get()
    assert decision.actor == "user:officer" and decision.session_id == "admin:officer"
    assert decision.payload["sha256"] == export.sha256 and decision.payload["export_id"] == str(export.pk)
    assert decision.payload["scope"]["kind"] == "agent" and decision.payload["scope"]["agent"] == "bob"
    assert verify_export.verify(export.path).ok


def test_exports_of_every_scope_verify(trail: Caller) -> None:
    from datetime import timedelta

    from django.utils import timezone

    with tenant_context(trail.tenant):
        for scope in (
            {"scope": "all"},
            {"scope": "range", "occurred_from": timezone.now() - timedelta(hours=1)},
            {"scope": "agent", "agent_name": "alice"},
            {"scope": "session", "session_id": "no-such-session"},
        ):
            export = export_of(**scope)
            assert export.status == ExportStatus.DONE, (scope, export.error)
            report = verify_export.verify(export.path)
            assert report.ok, (scope, report.failures)


def test_an_export_from_a_broken_chain_fails_offline(trail: Caller) -> None:
    with tenant_context(trail.tenant):
        with behind_the_triggers() as cursor:
            cursor.execute("UPDATE memory_event SET content = 'edited' WHERE seq = 5")
        export = export_of(scope="session", session_id="s-audit")
    report = verify_export.verify(export.path)
    assert any(f.startswith("content_altered: event #5") for f in report.failures)


def test_bad_scopes_are_refused_naming_the_field(alice: Caller) -> None:
    from core.errors import InvalidInput

    with tenant_context(alice.tenant):
        for scope, field in (
            ({"scope": "session"}, "session_id"),
            ({"scope": "agent", "agent_name": "nobody"}, "agent_name"),
            ({"scope": "range"}, "occurred_from"),
            ({"scope": "everything"}, "scope"),
        ):
            with pytest.raises(InvalidInput) as error:
                services.export_request(username="officer", **scope)  # type: ignore[arg-type]
            assert error.value.field == field
