"""The Ed25519 key that signs chain anchors and export manifests (RFC 8032, through ``cryptography``).

The private key is PEM (PKCS #8) from ``ENGRAM_SIGNING_KEY_FILE`` or ``ENGRAM_SIGNING_KEY``
(settings ``ENGRAM["SIGNING_KEY"]``); ``./engram up`` generates one on first run into
``var/dev/secrets/signing-key.pem`` (mode 0600). The public key is published (the admin's
"public key" download, and inside every export) so an auditor checks signatures without Engram;
``key_id`` names it: the SHA-256 (hex) of its 32 raw bytes.

Checking needs only the public key: ``ENGRAM_SIGNING_PUBLIC_KEY_FILE`` or ``ENGRAM_SIGNING_PUBLIC_KEY``
(PEM, settings ``ENGRAM["SIGNING_PUBLIC_KEY"]``), else the configured private key's half. A process
that only verifies (``verify_chain``) is given the public key and no private one.
"""

from __future__ import annotations

import functools
import hashlib

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings

from core.errors import ServiceUnavailable


@functools.cache
def _load(pem: str) -> Ed25519PrivateKey:
    key = serialization.load_pem_private_key(pem.encode(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ServiceUnavailable("The signing key is not an Ed25519 key.", field="signing_key")
    return key


def signing_key() -> Ed25519PrivateKey:
    """The configured private key. Raises ``ServiceUnavailable`` when none is configured or it
    cannot be read (anchors and exports then refuse, clearly, rather than go unsigned)."""
    pem = settings.ENGRAM.get("SIGNING_KEY") or ""
    if not pem.strip():
        raise ServiceUnavailable(
            "No signing key is configured (ENGRAM_SIGNING_KEY_FILE): anchors and exports cannot be signed.",
            field="signing_key",
        )
    try:
        return _load(pem.strip() + "\n")
    except ValueError as exc:
        raise ServiceUnavailable(f"The signing key cannot be read: {exc}", field="signing_key") from None


@functools.cache
def _load_public(pem: str) -> Ed25519PublicKey:
    key = serialization.load_pem_public_key(pem.encode())
    if not isinstance(key, Ed25519PublicKey):
        raise ServiceUnavailable("The public key is not an Ed25519 key.", field="public_key")
    return key


def public_key_from_pem(pem: str | bytes) -> Ed25519PublicKey:
    """An Ed25519 public key from its PEM text (SubjectPublicKeyInfo, as ``public_key_pem`` writes
    it). Raises ``ServiceUnavailable`` when it is not one."""
    text = pem.decode() if isinstance(pem, bytes) else pem
    try:
        return _load_public(text.strip() + "\n")
    except ValueError as exc:
        raise ServiceUnavailable(f"The public key cannot be read: {exc}", field="public_key") from None


def public_key() -> Ed25519PublicKey:
    """The key that checks signatures: the configured public key (``ENGRAM["SIGNING_PUBLIC_KEY"]``)
    when there is one, else the signing key's public half. Raises ``ServiceUnavailable`` when
    neither is configured, or when both are and the public key is not the signing key's half."""
    pem = settings.ENGRAM.get("SIGNING_PUBLIC_KEY") or ""
    has_private = bool((settings.ENGRAM.get("SIGNING_KEY") or "").strip())
    if not pem.strip():
        if not has_private:
            raise ServiceUnavailable(
                "No public key is configured (ENGRAM_SIGNING_PUBLIC_KEY_FILE, or the signing key "
                "ENGRAM_SIGNING_KEY_FILE): signatures cannot be checked.",
                field="public_key",
            )
        return signing_key().public_key()
    key = public_key_from_pem(pem)
    if has_private and key_id_of(key) != key_id_of(signing_key().public_key()):
        raise ServiceUnavailable(
            "The public key (ENGRAM_SIGNING_PUBLIC_KEY_FILE) does not match the signing key "
            "(ENGRAM_SIGNING_KEY_FILE).",
            field="public_key",
        )
    return key


def public_key_pem(key: Ed25519PublicKey | None = None) -> bytes:
    """The public key (default: ``public_key()``) as PEM (SubjectPublicKeyInfo), what ``openssl
    pkey -pubin`` reads."""
    return (key or public_key()).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def key_id_of(key: Ed25519PublicKey) -> str:
    """SHA-256 (hex, 64 chars) of the key's 32 raw bytes."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def key_id() -> str:
    """The id of the signing key (see ``key_id_of``). Raises ``ServiceUnavailable`` without one:
    signers call it before any work."""
    return key_id_of(signing_key().public_key())


def sign(message: bytes) -> str:
    """The Ed25519 signature of ``message`` (hex, 128 chars)."""
    return signing_key().sign(message).hex()


def signature_valid(message: bytes, signature_hex: str, key: Ed25519PublicKey | None = None) -> bool:
    """Whether ``signature_hex`` is ``key``'s (default: the configured key's) signature of ``message``."""
    try:
        (key or public_key()).verify(bytes.fromhex(signature_hex), message)
    except (InvalidSignature, ValueError):
        return False
    return True


def private_key_pem_new() -> str:
    """A new Ed25519 private key as PEM (PKCS #8, unencrypted)."""
    return (
        Ed25519PrivateKey.generate()
        .private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        .decode()
    )
