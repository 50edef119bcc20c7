"""The offline erasure receipt verifier (``compliance/verify_receipt.py``), run as an officer would:
the receipt and the public key downloaded from the admin, the command started as a separate Python
process from the file alone. A receipt verifies and says what it covers; a changed byte, another
key, another erasure's id or a receipt approved by its own requester does not."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.utils import timezone
from django_tenants.utils import tenant_context

from compliance import services, verify_receipt
from memory.episodic.models import EventKind
from memory.episodic.services import EventData, events_append
from tests.factories import BASE_DIR, Caller, admin_client

SUBJECT = "cust-receipt-42"


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # the file alone, copied away from the project: it must need nothing of Engram
    script = tmp_path / "verify_receipt.py"
    shutil.copy(BASE_DIR / "compliance" / "verify_receipt.py", script)
    return subprocess.run(
        [sys.executable, "-I", str(script), *args], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )


def test_a_downloaded_receipt_verifies_offline_and_a_changed_one_does_not(
    alice: Caller, tmp_path: Path
) -> None:
    with tenant_context(alice.tenant):
        events_append(
            agent=alice.agent,
            events=[
                EventData(
                    session_id="s-receipt",
                    kind=EventKind.MESSAGE,
                    content=f"my card ends in 40{i}",
                    occurred_at=timezone.now(),
                    data_subject=SUBJECT,
                )
                for i in range(3)
            ],
        )
        request = services.erasure_request(
            kind="subject", value=SUBJECT, legal_basis="GDPR Art. 17(1)(a)", note="", username="olga"
        )
        services.erasure_approve(request_id=request.pk, username="pavel")
        done = services.erasure_run(request_id=request.pk)
        assert done.status == "done", done.error
    officer = admin_client(alice.tenant, "officer", group="compliance officer")
    receipt = tmp_path / "receipt.json"
    receipt.write_bytes(officer.get(f"/admin/compliance/erasurerequest/{done.pk}/receipt/").content)
    key = tmp_path / "key.pem"
    key.write_bytes(officer.get("/admin/compliance/anchor/public-key/").content)

    checked = _run(tmp_path, "receipt.json", "--public-key", "key.pem", "--erasure-id", str(done.pk))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "OK: receipt.json verifies" in checked.stdout
    assert f"erasure {done.pk} of tenant {alice.tenant.schema_name}" in checked.stdout
    assert "approved by user:pavel" in checked.stdout and "events_redacted 3" in checked.stdout
    assert SUBJECT not in checked.stdout

    other = _run(tmp_path, "receipt.json", "--public-key", "key.pem", "--erasure-id", "not-this-one")
    assert other.returncode == 1 and "FAIL scope:" in other.stdout

    wrapper = json.loads(receipt.read_text())
    tampered = tmp_path / "tampered.json"
    tampered.write_text(
        json.dumps(
            {**wrapper, "receipt": wrapper["receipt"].replace('"events_redacted":3', '"events_redacted":2')}
        )
    )
    changed = _run(tmp_path, "tampered.json", "--public-key", "key.pem")
    assert changed.returncode == 1 and "FAIL signature:" in changed.stdout, changed.stdout

    stranger = tmp_path / "stranger.pem"
    stranger.write_bytes(
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    foreign = _run(tmp_path, "receipt.json", "--public-key", "stranger.pem")
    assert foreign.returncode == 1 and "FAIL key:" in foreign.stdout and "FAIL signature:" in foreign.stdout

    garbage = tmp_path / "garbage.json"
    garbage.write_text("not json")
    assert _run(tmp_path, "garbage.json", "--public-key", "key.pem").returncode == 2


def test_a_receipt_approved_by_its_requester_fails_four_eyes(tmp_path: Path) -> None:
    """Signed by a key the check trusts, but one person asked and approved: named as such."""
    private = Ed25519PrivateKey.generate()
    document = {
        "v": 1,
        "type": "engram-erasure-receipt",
        "erasure_id": "e-1",
        "tenant": "acme",
        "requested_by": "user:olga",
        "approved_by": "user:olga",
        "verification": {"clean": True},
        "stores": {},
        "key_id": verify_receipt.key_id_of(private.public_key()),
    }
    text = verify_receipt.canonical(document)
    raw = json.dumps(
        {"receipt": text, "signature": private.sign(text.encode()).hex(), "key_id": document["key_id"]}
    ).encode()
    pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    result = verify_receipt.verify(raw, pem)
    assert [f.split(":")[0] for f in result.failures] == ["four-eyes"], result.failures
