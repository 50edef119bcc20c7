"""Agent identities and their API keys (tenant schema)."""

from __future__ import annotations

import hashlib
import hmac

from django.contrib.postgres.fields import ArrayField
from django.core.serializers.json import DjangoJSONEncoder
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone


class Agent(models.Model):
    """A software agent that reads and writes memory through the API."""

    name = models.CharField(
        max_length=100,
        unique=True,
        validators=[RegexValidator(r"^[A-Za-z0-9._\-]+$", "Use letters, digits, '.', '_' or '-'.")],
        help_text="Letters, digits, '.', '_' or '-' (it appears in blackboard field names).",
    )
    role = models.CharField(max_length=100, blank=True, help_text="e.g. planner, researcher, critic")
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    #: The data subject (end user) this agent acts for in the current request: its key's binding
    #: (``ApiKey.data_subject``), set by ``agents.authentication.resolve_api_key``; "" for an unbound
    #: key and outside a request. Not a column: the rules of ``agents.subjects`` read it.
    acting_for: str = ""

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    # DRF treats ``request.user`` as the principal: an authenticated agent is that principal.
    @property
    def is_authenticated(self) -> bool:
        return True


class Scope(models.TextChoices):
    """What a key may do: ``read`` (GET and search), ``write`` (store and change its own memory),
    ``curate`` (also forget other agents' shared memories and retract other agents' facts)."""

    READ = "read", "read"
    WRITE = "write", "write"
    CURATE = "curate", "curate"


class ApiKey(models.Model):
    """An API key for one agent: ``egm.<tenant schema>.<key_id>.<secret>``.

    ``data_subject``: the end user the key is bound to ("" for none). A bound key reads only its
    subject's rows and rows naming no subject, and its writes carry its subject
    (``agents.subjects``; docs/decisions/0078).

    Only the SHA-256 of the secret is stored; the full key is shown once, when it is created.
    A fast hash is right here: the secret is 256 bits of randomness, not a password.
    """

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True)
    key_id = models.CharField(max_length=16, unique=True, editable=False)
    secret_hash = models.CharField(max_length=64, editable=False)
    scopes = ArrayField(models.CharField(max_length=10, choices=Scope.choices), default=list)
    data_subject = models.CharField(
        max_length=200,
        blank=True,
        default="",
        help_text="The end user (data subject) the key acts for: it reads and writes only that "
        "subject's data (and data naming no subject). Blank: not bound.",
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.key_id} ({self.agent.name})"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @staticmethod
    def hash_secret(secret: str) -> str:
        """Hex SHA-256 of the secret part of a key."""
        return hashlib.sha256(secret.encode()).hexdigest()

    def check_secret(self, secret: str) -> bool:
        """Constant-time comparison of ``secret`` with the stored hash."""
        return hmac.compare_digest(self.secret_hash, self.hash_secret(secret))

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes


class IdempotencyRecord(models.Model):
    """A POST sent with an ``Idempotency-Key`` header: its request, and the first answer of a write
    kept for replays (the replay cache, one store of the lifecycle's map).

    Keys are scoped to the agent and the end user its key acts for (``data_subject``, "" for an
    unbound key): a key bound to another end user never replays this answer
    (docs/decisions/0099); ``fingerprint`` is the SHA-256 of method, path and body, so the same
    key with a different request is detected (409). ``response_body`` is null for a read (recall,
    search, context: run again on a replay, never stored) and for an answer an erasure withdrew
    (``withdrawn_at``: it may have quoted erased rows; a replay is then a 409).
    """

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    data_subject = models.CharField(max_length=200, blank=True, default="")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)
    response_status = models.PositiveSmallIntegerField()
    response_body = models.JSONField(encoder=DjangoJSONEncoder, null=True)
    created_at = models.DateTimeField(default=timezone.now)
    withdrawn_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "data_subject", "key"], name="idempotency_agent_key_uniq"
            )
        ]
        indexes = [models.Index(fields=["created_at"])]

    def __str__(self) -> str:
        return f"{self.key} ({self.response_status})"
