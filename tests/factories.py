"""Factories and helpers the tests share: paths, callers (an agent with a key and a client), events,
memories, facts, contradictions, admin users, checkpoints, servers started for a test, and the
graph projection's expected and actual states."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import psycopg
import pytest
from django.contrib.auth.models import Group, User
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.test import Client
from django.utils import timezone
from django_tenants.utils import tenant_context
from rest_framework.test import APIClient

from agents.models import Agent, Scope
from agents.services import agent_create, api_key_create
from memory.episodic.models import Event, EventKind
from memory.episodic.services import EventData, events_append
from memory.knowledge import services
from memory.knowledge.models import (
    LIVE_STATUSES,
    Contradiction,
    Fact,
)
from memory.knowledge.services import FactData, FactObject
from tenants.models import Tenant

BASE_DIR = Path(__file__).resolve().parent.parent


SHARED_DIR = Path(__file__).resolve().parent.parent.parent / "shared"


LOCOMO_PATH = SHARED_DIR / "data" / "locomo" / "locomo-dev5.json"

MADIAL_DIR = SHARED_DIR / "data" / "madial"


MODEL_DIR = SHARED_DIR / "models" / "all-MiniLM-L6-v2-onnx"


def in_ci() -> bool:
    """True under CI (``CI=true``, which ``.ci/run`` exports): there every test must run."""
    return os.environ.get("CI", "").lower() == "true"


def unavailable(reason: str) -> NoReturn:
    """The one way a test gives up because something it needs is missing here (shared data, a
    server, a program, a kind of login): skipped with ``reason``, except under CI, where the test
    fails with the same ``reason``. Raises pytest's skip or fail outcome; never returns."""
    if in_ci():
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


# Semantic memory needs the embedding model; there is no model hub to fetch it from here.
def needs_shared(path: Path, what: str, *, env: str | None = None) -> pytest.MarkDecorator:
    """Mark a test that needs ``path`` from the read-only ``shared/`` folder beside the repository
    (or the folder named by ``env``): without it the test is skipped with a clear reason, except
    under CI (``CI=true``), where it fails (see ``pytest_runtest_setup`` in conftest)."""
    return pytest.mark.needs_shared(path=path, what=what, env=env)


def shared_missing(path: Path, what: str, env: str | None) -> str | None:
    """Why a ``needs_shared`` test cannot run, or None when what it needs is there."""
    if path.exists() or (env and os.environ.get(env)):
        return None
    unset = f" and {env} is unset" if env else ""
    return f"{what} not found at {path} (the shared/ folder beside the repository){unset}"


requires_model = needs_shared(MODEL_DIR, "the MiniLM ONNX embedding model", env="ENGRAM_EMBEDDING_MODEL_PATH")


@dataclass
class Caller:
    """An agent in a tenant with an API client that carries its key."""

    tenant: Tenant
    agent: Agent
    key: str
    client: APIClient

    def post(self, path: str, data: object, **headers: str):  # type: ignore[no-untyped-def]
        return self.client.post(path, data, format="json", headers=headers)

    def get(self, path: str, params: dict | None = None):  # type: ignore[no-untyped-def]
        return self.client.get(path, params or {})


def make_caller(
    tenant: Tenant, name: str, scopes: tuple[str, ...] = (Scope.READ, Scope.WRITE), data_subject: str = ""
) -> Caller:
    """Create agent ``name`` (unless it exists) with a key in ``tenant`` (bound to ``data_subject``
    when given) and return a client authenticated as it."""
    with tenant_context(tenant):
        agent = Agent.objects.filter(name=name).first() or agent_create(by=None, name=name)
        _, key = api_key_create(by=None, agent=agent, scopes=scopes, data_subject=data_subject)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return Caller(tenant, agent, key, client)


def drop_tenant_roles_of(database: str) -> None:
    """Drop the tenant roles of the (dropped) test database ``database``: roles belong to the whole
    server and outlive the database. Only for a prefix derived from the database's name."""
    from django.conf import settings

    from core.tenancy import maintenance_role, quote_ident, roles_enabled, tenant_role

    if not roles_enabled() or settings.ENGRAM.get("DB_TENANT_ROLE_PREFIX"):
        return
    prefix = tenant_role("", database=database)
    with connection._nodb_cursor() as cursor:  # type: ignore[attr-defined]
        cursor.execute(f"SET ROLE {quote_ident(maintenance_role())}")
        cursor.execute("SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s)", [prefix])
        for (name,) in cursor.fetchall():
            cursor.execute(f"DROP ROLE {quote_ident(name)}")


def drop_stale_test_roles() -> None:
    """Drop the tenant roles left by test runs whose database is gone (a run killed before its
    teardown), so they do not pile up on a server the runs share."""
    from core.tenancy import maintenance_role, quote_ident, roles_enabled

    if not roles_enabled():
        return
    with connection._nodb_cursor() as cursor:  # type: ignore[attr-defined]
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [maintenance_role()])
        if cursor.fetchone() is None:
            return  # a fresh server: nothing can be stale yet
        cursor.execute(f"SET ROLE {quote_ident(maintenance_role())}")
        cursor.execute(
            "SELECT r.rolname FROM pg_roles r WHERE r.rolname ~ '^test_engram_[0-9]+_t_' AND NOT EXISTS "
            "(SELECT 1 FROM pg_database d WHERE starts_with(r.rolname, d.datname || '_t_'))"
        )
        for (name,) in cursor.fetchall():
            cursor.execute(f"DROP ROLE {quote_ident(name)}")


@contextmanager
def behind_the_triggers() -> Iterator[CursorWrapper]:
    """A cursor in the current tenant's schema with the episodic log's append-only trigger off for
    the block: what the owner of the tables (the maintenance role) could do behind the API's back.
    The chain must still tell."""
    from core.tenancy import maintenance

    with maintenance(), connection.cursor() as cursor:
        # ALTER TABLE refuses while the transaction's deferred FK checks on the table are pending
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("ALTER TABLE memory_event DISABLE TRIGGER memory_event_append_only")
        try:
            yield cursor
        finally:
            cursor.execute("ALTER TABLE memory_event ENABLE TRIGGER memory_event_append_only")


def test_database_env(**extra: str) -> dict[str, str]:
    """Environment for a child process (Celery worker, web server) using this run's test database
    on the suite's PostgreSQL server, and the suite's Redis and Neo4j; with tenant logins on, as in
    production (this process switches with ``SET ROLE``: config/settings/test.py)."""
    url = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + connection.settings_dict["NAME"]
    env = {"DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "config.settings.test", "ENGRAM_TENANT_LOGINS": "1"}
    return {**os.environ, **env, **extra}


#: what PostgreSQL says to a login with the wrong password (libpq reports no SQLSTATE for it)
INVALID_PASSWORD = "password authentication failed"


def connect_as(role: str, password: str) -> str:
    """``"ok"`` if ``role`` may connect to this run's database with ``password``, else
    ``INVALID_PASSWORD`` or the error's message."""
    params = connection.get_connection_params()
    params = {name: params[name] for name in ("dbname", "host", "port") if params.get(name)}
    try:
        with psycopg.connect(**params, user=role, password=password, connect_timeout=10) as raw:
            raw.execute("SELECT 1")
    except psycopg.OperationalError as exc:
        return INVALID_PASSWORD if INVALID_PASSWORD in str(exc) else str(exc)
    return "ok"


@contextmanager
def asgi_server(app: str = "config.asgi:application", **extra_env: str) -> Iterator[int]:
    """A real uvicorn process serving ``app`` on the test database for the ``with`` block; yields
    its port."""
    from devstack import free_port
    from devstack.web import uvicorn_command, wait_for_http

    port = free_port()
    server = subprocess.Popen(
        uvicorn_command(port, app=app), cwd=BASE_DIR, env=test_database_env(**extra_env)
    )
    try:
        # 60 s: on a loaded 2-core machine (CI beside other runs) importing the app alone took 6 s
        wait_for_http(f"http://127.0.0.1:{port}/api/v1/me", server, timeout=60)
        yield port
    finally:
        server.terminate()
        server.wait(15)


def postgres_projection() -> tuple[set[tuple[int, int, int, str, str]], set[int]]:
    """What the projection must hold (current tenant): live entity-to-entity facts as
    (fact, subject, object, predicate, status), and the entities they touch."""
    facts = {
        (f.pk, f.subject_id, f.object_entity_id, f.predicate.name, f.status)
        for f in Fact.objects.filter(status__in=LIVE_STATUSES, object_entity__isnull=False).select_related(
            "predicate"
        )
    }
    return facts, {e for _, s, o, _, _ in facts for e in (s, o)}


def projection_caught_up(*, batch_size: int | None = None) -> None:
    """Drain the current tenant's graph outbox into Neo4j (``outbox_drain``, in batches of
    ``batch_size`` rows or its default) and wait for the drains that others hold
    (the suite's Celery worker takes the drain each committed fact write queues): ``outbox_drain``
    skips the rows another drain has claimed (``SKIP LOCKED``) and returns before that drain has
    written them to Neo4j. Returns once no row is pending: Neo4j holds what PostgreSQL does."""
    from memory.knowledge.models import GraphOutbox
    from memory.knowledge.projection import outbox_drain

    batches = {} if batch_size is None else {"batch_size": batch_size}
    while True:
        outbox_drain(**batches)
        with transaction.atomic():
            # blocks until the drains holding pending rows end: the rows they marked processed drop
            # out, those they left pending (their write failed) go round again
            pending = GraphOutbox.objects.select_for_update().filter(processed_at__isnull=True)
            if not list(pending.values_list("pk", flat=True)):
                return


def neo4j_projection(driver, tenant: str) -> tuple[set[tuple[int, int, int, str, str]], set[int]]:  # type: ignore[no-untyped-def]
    """What the projection holds for ``tenant``, in the shape of :func:`postgres_projection`."""
    records, _, _ = driver.execute_query(
        "MATCH (s:Entity {tenant: $t})-[r:FACT {tenant: $t}]->(o:Entity {tenant: $t}) "
        "RETURN r.fact_id AS f, s.id AS s, o.id AS o, r.predicate AS p, r.status AS st",
        t=tenant,
    )
    facts = {(r["f"], r["s"], r["o"], r["p"], r["st"]) for r in records}
    nodes, _, _ = driver.execute_query("MATCH (n:Entity {tenant: $t}) RETURN n.id AS id", t=tenant)
    return facts, {r["id"] for r in nodes}


UNICODE_SAMPLES = [
    "Ünïcødé accents: São Paulo, Zürich, Ærøskøbing",
    "emoji 🧠🤖👩🏽‍💻 and flags 🇵🇹",
    "CJK 記憶は大切です 기억 记忆",
    "right-to-left: שלום עולם مرحبا بالعالم",
    "  leading and trailing spaces, tabs\tand\nnewlines  ",
]


def event(content: str = "hello", **extra: object) -> dict[str, object]:
    return {
        "session_id": "s1",
        "kind": "message",
        "role": "user",
        "content": content,
        "occurred_at": "2026-03-01T10:00:00Z",
        **extra,
    }


FACTS = [
    ("Alice works at Acme Corp as a data engineer in Lisbon.", ["people", "work"]),
    ("The deployment pipeline runs every night at 2am UTC.", ["ops"]),
    ("Bob prefers tea over coffee in the morning.", ["people", "preferences"]),
    ("The quarterly report is due on the fifteenth of March.", ["deadlines"]),
]


def remember(caller: Caller, content: str, **extra: object):  # type: ignore[no-untyped-def]
    return caller.post("/api/v1/memories", {"content": content, **extra})


def search(caller: Caller, query: str, **extra: object) -> list[dict]:
    response = caller.post("/api/v1/memories/search", {"query": query, **extra})
    assert response.status_code == 200, response.content
    return response.json()["results"]


def contents(results: list[dict]) -> list[str]:
    return [r["memory"]["content"] for r in results]


def fact(subject: str, predicate: str, obj: dict, **extra: object) -> dict:
    return {"subject": subject, "predicate": predicate, "object": obj, **extra}


def assert_fact(caller: Caller, body: dict | list):  # type: ignore[no-untyped-def]
    """POST facts; checks the status rule (201 when a fact was created, 200 when all were known)."""
    response = caller.post("/api/v1/facts", body)
    assert response.status_code in (200, 201), response.content
    data = response.json()
    outcomes = [data["outcome"]] if isinstance(body, dict) else [r["outcome"] for r in data["results"]]
    assert response.status_code == (201 if set(outcomes) - {"reinforced"} else 200), (
        outcomes,
        response.status_code,
    )
    return data


PASSWORD = "pw-123456789"


QUEUE = "/admin/memory/contradiction/queue/"


HTMX = {"HTTP_HX_REQUEST": "true"}


def resolve_url(contradiction_id: int) -> str:
    return f"/admin/memory/contradiction/{contradiction_id}/resolve/"


def staff_user(tenant: Tenant, username: str, *, group: str | None = None, superuser: bool = False) -> User:
    """A staff user of ``tenant`` (its own schema's auth tables), optionally in one of the review groups."""
    with tenant_context(tenant):
        if superuser:
            return User.objects.create_superuser(username, f"{username}@example.com", PASSWORD)
        user = User.objects.create_user(username, f"{username}@example.com", PASSWORD, is_staff=True)
        if group:
            user.groups.add(Group.objects.get(name=group))
        return user


def admin_client(tenant: Tenant, username: str, **kind: object) -> Client:
    """A test client logged in to ``tenant``'s admin (on ``<schema>.localhost``) as a new user."""
    staff_user(tenant, username, **kind)  # type: ignore[arg-type]
    client = Client(HTTP_HOST=f"{tenant.schema_name}.localhost")
    response = client.post("/admin/login/", {"username": username, "password": PASSWORD})
    assert response.status_code == 302, "login failed"
    return client


def say(agent: Agent, session_id: str, text: str) -> Event:
    """An event in the episodic log that a fact can cite as its source."""
    return events_append(
        agent=agent,
        events=[
            EventData(session_id=session_id, kind=EventKind.MESSAGE, content=text, occurred_at=timezone.now())
        ],
    )[0]


@dataclass
class Dispute:
    """An open contradiction between ``existing`` (active) and ``new`` (disputed)."""

    contradiction: Contradiction
    existing: Fact
    new: Fact


def conflict_make(
    first: Agent,
    second: Agent,
    *,
    subject: str = "Alice",
    predicate: str = "works_at",
    old: str = "Acme",
    new: str = "Globex",
) -> Dispute:
    """``first`` asserts (subject, predicate, old) citing an event, then ``second`` asserts
    (subject, predicate, new) citing another: one open contradiction. Call inside the tenant."""
    said_old = say(first, "s-onboarding", f"{subject} told me they joined {old} in March.")
    said_new = say(second, "s-review", f"{subject}'s new badge says {new}.")
    existing = services.fact_assert(
        agent=first,
        data=FactData(
            subject=subject,
            predicate=predicate,
            object=FactObject(entity=old),
            confidence=0.7,
            session_id="s-onboarding",
            source_event_id=said_old.pk,
        ),
    ).fact
    result = services.fact_assert(
        agent=second,
        data=FactData(
            subject=subject,
            predicate=predicate,
            object=FactObject(entity=new),
            confidence=0.9,
            session_id="s-review",
            source_event_id=said_new.pk,
        ),
    )
    assert result.contradiction is not None
    return Dispute(result.contradiction, existing, result.fact)


def open_count(html: str) -> int:
    match = re.search(r'id="open-count">(\d+)<', html)
    assert match, "no open count in the page"
    return int(match.group(1))


def rows(html: str) -> list[int]:
    """Ids of the queue rows present in ``html`` (not out-of-band deletions)."""
    return [int(i) for i in re.findall(r'<article class="cq-item" id="contradiction-(\d+)"', html)]


# --- procedural memory: the password-reset skill of the README, and its tools ---------------------------


def object_schema(properties: dict, required: list[str], **extra: object) -> dict:
    """A JSON Schema 2020-12 object schema."""
    return {"type": "object", "properties": properties, "required": required, **extra}


PASSWORD_RESET_TOOLS = {
    "send_verification_code": (
        "E-mail a six-digit code to the address.",
        object_schema({"email": {"type": "string", "format": "email"}}, ["email"]),
        object_schema(
            {"challenge_id": {"type": "string"}, "expires_in": {"type": "integer"}}, ["challenge_id"]
        ),
    ),
    "verify_code": (
        "Check the code the user typed against the challenge.",
        object_schema(
            {"challenge_id": {"type": "string"}, "code": {"type": "string", "pattern": "^[0-9]{6}$"}},
            ["challenge_id", "code"],
        ),
        object_schema(
            {"verified": {"type": "boolean"}, "user_id": {"type": "string"}}, ["verified", "user_id"]
        ),
    ),
    "reset_password": (
        "Invalidate the password and issue a one-time reset link.",
        object_schema({"user_id": {"type": "string"}, "expires_minutes": {"type": "integer"}}, ["user_id"]),
        object_schema({"reset_link": {"type": "string", "format": "uri"}}, ["reset_link"]),
    ),
    "send_email": (
        "Send a templated e-mail.",
        object_schema(
            {
                "to": {"type": "string", "format": "email"},
                "template": {"type": "string", "enum": ["password_reset", "follow_up"]},
                "data": {"type": "object"},
            },
            ["to", "template"],
        ),
        object_schema({"message_id": {"type": "string"}}, ["message_id"]),
    ),
    "ask_user": (
        "Ask the user a question in the conversation.",
        object_schema({"question": {"type": "string", "minLength": 1}}, ["question"]),
        object_schema({"answer": {"type": "string"}}, ["answer"]),
    ),
}

PASSWORD_RESET_INPUT = object_schema(
    {
        "email": {"type": "string", "format": "email"},
        "code": {"type": "string"},
        "channel": {"type": "string", "enum": ["chat", "email"]},
    },
    ["email", "code", "channel"],
)

PASSWORD_RESET_STEPS = [
    {
        "id": "send_code",
        "tool": "send_verification_code",
        "params": {"email": {"$ref": "input.email"}},
        "on_error": "retry",
        "retries": 2,
    },
    {
        "id": "verify",
        "tool": "verify_code",
        "params": {
            "challenge_id": {"$ref": "steps.send_code.output.challenge_id"},
            "code": {"$ref": "input.code"},
        },
        "output_as": "identity",
    },
    {"id": "reset", "tool": "reset_password", "params": {"user_id": {"$ref": "identity.user_id"}}},
    {
        "id": "notify",
        "tool": "send_email",
        "params": {
            "to": {"$ref": "input.email"},
            "template": "password_reset",
            "data": {"link": {"$ref": "steps.reset.output.reset_link"}},
        },
    },
    {
        "id": "follow_up",
        "tool": "ask_user",
        "when": 'input.channel == "chat" && identity.verified',
        "params": {"question": "Did the reset link work for you?"},
        "on_error": "skip",
    },
]

PASSWORD_RESET = {
    "name": "reset-password",
    "title": "Reset a user's password",
    "description": "Confirm the user's identity with an e-mailed code, reset the password, "
    "send the reset link and ask whether it worked.",
    "intents": ["reset my password", "I forgot my password", "cannot log in, locked out of my account"],
    "tags": ["accounts", "support"],
    "input_schema": PASSWORD_RESET_INPUT,
    "steps": PASSWORD_RESET_STEPS,
}


def tools_define(caller: Caller, tools: dict | None = None) -> None:
    """POST the tools (default: the password-reset ones) as ``caller``."""
    for name, (description, input_schema, output_schema) in (tools or PASSWORD_RESET_TOOLS).items():
        response = caller.post(
            "/api/v1/tools",
            {
                "name": name,
                "description": description,
                "input_schema": input_schema,
                "output_schema": output_schema,
            },
        )
        assert response.status_code in (200, 201), response.content


def skill_seed(caller: Caller, **overrides: object) -> dict:
    """The tools and the password-reset skill proposed by ``caller`` (a draft v1); the response body."""
    tools_define(caller)
    response = caller.post("/api/v1/skills", {**PASSWORD_RESET, **overrides})
    assert response.status_code == 201, response.content
    return response.json()


def skill_publish(tenant: Tenant, name: str, number: int, *, username: str = "op") -> None:
    """Publish version ``number`` of skill ``name`` as the person ``username`` (services, no admin)."""
    from memory.procedural.models import SkillVersion, VersionStatus
    from memory.procedural.services.versions import version_publish

    with tenant_context(tenant):
        current = SkillVersion.objects.filter(skill__name=name, status=VersionStatus.PUBLISHED).first()
        version_publish(
            username=username,
            name=name,
            number=number,
            expected_published=current.number if current else None,
        )
