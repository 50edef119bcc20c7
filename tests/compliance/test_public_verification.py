"""Checking the trail needs only public material (issue 28, item 12): ``verify_chain`` checks the
chain, the anchors' signatures and the redaction decisions' with the public key alone (configured,
or given on the command line); ``./engram manage`` has it; and an operator anchors the head on
demand with ``anchor_chain``, not only on the beat's schedule."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management import CommandError, call_command
from django_tenants.utils import tenant_context

from compliance import services, signing
from compliance.models import Anchor
from tests.compliance.conftest import append, behind_the_triggers
from tests.factories import Caller


def run(command: str, **options: object) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command(command, stdout=out, **options)
    except SystemExit as exit_info:
        return int(exit_info.code or 0), out.getvalue()
    return 0, out.getvalue()


@pytest.fixture
def anchored(alice: Caller) -> Caller:
    with tenant_context(alice.tenant):
        append(alice.agent, 6)
        assert services.anchor_head() is not None
        append(alice.agent, 2)
        assert services.anchor_head() is not None
    return alice


def a_stranger_public_pem() -> bytes:
    return (
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def public_only(settings, pem: str) -> None:  # type: ignore[no-untyped-def]
    settings.ENGRAM = {**settings.ENGRAM, "SIGNING_KEY": "", "SIGNING_PUBLIC_KEY": pem}


def test_verify_chain_checks_the_anchors_with_the_public_key_alone(anchored: Caller, settings) -> None:  # type: ignore[no-untyped-def]
    public_only(settings, signing.public_key_pem().decode())
    with pytest.raises(Exception, match="No signing key"):
        signing.sign(b"x")  # the private half is really gone
    assert run("verify_chain", tenant="alpha") == (
        0,
        "chain intact: 8 events verified, 2 anchors checked\n",
    )
    with tenant_context(anchored.tenant):
        with behind_the_triggers() as cursor:
            cursor.execute("UPDATE compliance_anchor SET signature = %s WHERE seq = 6", ["ab" * 64])
    code, out = run("verify_chain", tenant="alpha")
    assert code == 1 and "anchor_signature" in out and "the anchor of #6" in out


def test_verify_chain_takes_the_public_key_as_a_file(anchored: Caller, settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pem = tmp_path / "engram-signing-key.pub.pem"  # as the admin's "public key" link downloads it
    pem.write_bytes(signing.public_key_pem())
    settings.ENGRAM = {**settings.ENGRAM, "SIGNING_KEY": "", "SIGNING_PUBLIC_KEY": ""}
    with pytest.raises(CommandError, match="public key"):
        call_command("verify_chain", tenant="alpha", stdout=io.StringIO())
    assert run("verify_chain", tenant="alpha", public_key=str(pem))[0] == 0
    other = tmp_path / "other.pub.pem"
    other.write_bytes(a_stranger_public_pem())
    code, out = run("verify_chain", tenant="alpha", public_key=str(other))
    assert code == 1 and "does not verify" in out


def test_a_public_key_that_is_not_the_signing_keys_half_is_refused(settings) -> None:  # type: ignore[no-untyped-def]
    settings.ENGRAM = {**settings.ENGRAM, "SIGNING_PUBLIC_KEY": a_stranger_public_pem().decode()}
    with pytest.raises(Exception, match="does not match"):
        signing.public_key()


def test_an_operator_anchors_the_head_on_demand(alice: Caller) -> None:
    with tenant_context(alice.tenant):
        append(alice.agent, 3)
    code, out = run("anchor_chain", tenant="alpha")
    assert code == 0 and out.startswith("anchored #3 (hash ")
    with tenant_context(alice.tenant):
        anchor = Anchor.objects.get()
        assert anchor.seq == 3 and anchor.hash in out
    assert run("anchor_chain", tenant="alpha") == (0, "the head #3 is anchored already\n")
    assert run("anchor_chain", tenant="alpha", force=True)[1].startswith("anchored #3")
    with tenant_context(alice.tenant):
        assert Anchor.objects.count() == 2
    with pytest.raises(CommandError, match="no tenant"):
        call_command("anchor_chain", tenant="nobody", stdout=io.StringIO())


def test_anchor_chain_without_the_private_key_says_so(alice: Caller, settings) -> None:  # type: ignore[no-untyped-def]
    public_only(settings, signing.public_key_pem().decode())
    with tenant_context(alice.tenant):
        append(alice.agent, 1)
    with pytest.raises(CommandError, match="No signing key"):
        call_command("anchor_chain", tenant="alpha", stdout=io.StringIO())


def test_engram_manage_is_given_the_keys_of_engram_up(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from devstack.web import manage_environment, web_environment

    for name in ("ENGRAM_SIGNING_KEY", "ENGRAM_SIGNING_KEY_FILE", "ENGRAM_SIGNING_PUBLIC_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)
    web = web_environment({}, tmp_path)
    manage = manage_environment({}, tmp_path)
    assert manage["ENGRAM_SIGNING_KEY_FILE"] == web["ENGRAM_SIGNING_KEY_FILE"]
    public = Path(manage["ENGRAM_SIGNING_PUBLIC_KEY_FILE"])
    assert (
        public == Path(web["ENGRAM_SIGNING_PUBLIC_KEY_FILE"]) == tmp_path / "secrets" / "signing-key.pub.pem"
    )
    private = serialization.load_pem_private_key(Path(web["ENGRAM_SIGNING_KEY_FILE"]).read_bytes(), None)
    assert serialization.load_pem_public_key(public.read_bytes()).public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    ) == private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert manage["DJANGO_SETTINGS_MODULE"] == "config.settings.local"
