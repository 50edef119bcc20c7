"""Settings shared by every environment.

Everything that differs between machines is read from the environment with django-environ;
secrets may also come from ``<NAME>_FILE`` (a path whose content is the value).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote

import environ

BASE_DIR = Path(__file__).resolve().parent.parent.parent
env = environ.Env()
env.smart_cast = False


def env_secret(name: str, default: str | None = None) -> str | None:
    """Read ``name`` from the environment, or the file named by ``name_FILE``."""
    file_path = os.environ.get(f"{name}_FILE")
    if file_path:
        return Path(file_path).read_text().strip()
    return os.environ.get(name, default)


SECRET_KEY = env_secret("DJANGO_SECRET_KEY", "insecure-dev-key-change-me-0123456789abcdefghijklmnop")
DEBUG = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env.list(
    "DJANGO_ALLOWED_HOSTS", default=["localhost", ".localhost", "127.0.0.1", "testserver"]
)

# --- tenancy (django-tenants): one PostgreSQL schema per tenant -------------------------------------
SHARED_APPS = [
    "tenants",  # before django_tenants so our idempotent create_tenant command wins
    "django_tenants",
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.sessions",
    "django.contrib.messages",
    "config.apps.AdminConfig",  # django.contrib.admin with the project's site (core.admin.AdminSite)
    "django.contrib.staticfiles",
    "django_htmx",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and Redoc served from our static files
    "benchmarks",  # the LoCoMo ingest/eval commands; no models
    "api",  # no models: its `mcp` command (the MCP server over stdio)
]
TENANT_APPS = [
    # each tenant has its own users, sessions and admin log: an officer of one tenant never
    # authenticates against another tenant's schema
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.sessions",
    "config.apps.AdminConfig",  # django.contrib.admin with the project's site (core.admin.AdminSite)
    "agents",
    "memory",
    "compliance",
]
INSTALLED_APPS = SHARED_APPS + [app for app in TENANT_APPS if app not in SHARED_APPS]

TENANT_MODEL = "tenants.Tenant"
TENANT_DOMAIN_MODEL = "tenants.Domain"
PUBLIC_SCHEMA_NAME = "public"
PUBLIC_SCHEMA_URLCONF = "config.urls_public"
ROOT_URLCONF = "config.urls"
# API calls carry their tenant in the key, so any host may reach /api/v1/ through the public urlconf
SHOW_PUBLIC_IF_NO_TENANT_FOUND = True
DATABASE_ROUTERS = ["django_tenants.routers.TenantSyncRouter"]
# One `SET search_path` per connection and tenant instead of one before every query (a checkpoint
# save sent five, a search three: a round trip each). The backend forgets what it set when the
# connection closes (returns to the pool), on set_tenant, and on a rollback or savepoint rollback
# that undoes the SET, so a path is never assumed that PostgreSQL no longer has.
TENANT_LIMIT_SET_CALLS = True

MIDDLEWARE = [
    "api.ops.HealthMiddleware",  # /healthz and /readyz: before tenant routing and host checks
    "api.ops.RequestContextMiddleware",  # request id, access log line, latency histogram
    "api.middleware.TenantMiddleware",  # django-tenants', without the host lookup for /api/
    "api.middleware.ApiBodyLimitMiddleware",
    "api.middleware.DatabaseUnavailableMiddleware",  # PostgreSQL down: a 503, not a 500
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

CSRF_FAILURE_VIEW = "api.views.csrf_failure"
# The CSRF secret lives in the session (server-side, in the tenant's own schema), not in a cookie: a
# sibling tenant host (beta.localhost beside alpha.localhost) can set cookies for the parent domain,
# and over HTTP without an Origin header Django checks only that the token matches that cookie. The
# admin's forms and htmx requests take the token from the page ({{ csrf_token }}), never a cookie.
CSRF_USE_SESSIONS = True

WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

# --- data stores ------------------------------------------------------------------------------------


def _server_settings(url: str) -> dict[str, object]:
    """A PostgreSQL server's NAME, USER, PASSWORD, HOST and PORT from its URL (a Unix-socket
    directory percent-encoded in the host, as in DATABASE_URL)."""
    config = environ.Env.db_url_config(url)
    config["HOST"] = unquote(str(config.get("HOST", "")))
    return {key: config.get(key, "") for key in ("NAME", "USER", "PASSWORD", "HOST", "PORT")}


DATABASES = {"default": env.db("DATABASE_URL", default="postgres://postgres@127.0.0.1:5432/engram")}
# django-tenants' backend, with each unit of work under its tenant's PostgreSQL role (core/db/base.py)
DATABASES["default"]["ENGINE"] = "core.db"
# a Unix-socket directory arrives percent-encoded in the URL host (postgres://user@%2Fpath/db)
DATABASES["default"]["HOST"] = unquote(DATABASES["default"].get("HOST", ""))
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# PostgreSQL down or hung is a 503 within about 2 s (core/db/availability.py), not a 500 after the
# pool's timeout: a new connection waits at most DATABASE_CONNECT_TIMEOUT seconds (libpq's minimum is
# 2; a hung server would hold it for psycopg's default of 130 s), and after a failure to reach the
# server new connections are refused at once for DATABASE_UNAVAILABLE_FOR seconds (the Retry-After).
DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
    "connect_timeout", env.int("DATABASE_CONNECT_TIMEOUT", default=2)
)
DATABASE_UNAVAILABLE_FOR = env.float("DATABASE_UNAVAILABLE_FOR", default=2.0)
# Under ASGI (uvicorn) Django runs each request's sync code in a thread of its own, and connections
# are per thread: persistent connections are never reused and every request would open a new
# PostgreSQL connection (~10 ms). A psycopg pool (Django >= 5.1) lends connections to those threads;
# Django then closes (returns) them after each request, so persistent connections are off.
if env.bool("DATABASE_POOL", default=True):
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": env.int("DATABASE_POOL_MIN_SIZE", default=1),
        "max_size": env.int("DATABASE_POOL_MAX_SIZE", default=10),
        # seconds a request waits while every pooled connection is busy (not while the server is down)
        "timeout": env.float("DATABASE_POOL_TIMEOUT", default=10.0),
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env("REDIS_URL", default="redis://127.0.0.1:6379/0")
# REDIS_URL names one master of a Redis Cluster (the client finds the others): working memory and
# checkpoints' copies are spread over the masters by tenant (hash tag {<schema>}), see core/redis.py.
REDIS_CLUSTER = env.bool("REDIS_CLUSTER", default=False)

# Neo4j holds a projection of the knowledge graph; empty: graph queries run in PostgreSQL.
# NEO4J_USER empty: no authentication (the embedded test server listens on loopback only).
NEO4J_URI = env("NEO4J_URI", default="")
NEO4J_USER = env("NEO4J_USER", default="")
NEO4J_PASSWORD = env_secret("NEO4J_PASSWORD", "") or ""
# Seconds (see core/neo4j.py): Neo4j being down costs a graph read about this long once, after
# which reads answer from PostgreSQL at once for NEO4J_UNAVAILABLE_FOR.
NEO4J_CONNECTION_TIMEOUT = env.float("NEO4J_CONNECTION_TIMEOUT", default=3.0)
NEO4J_ACQUISITION_TIMEOUT = env.float("NEO4J_ACQUISITION_TIMEOUT", default=5.0)
NEO4J_MAX_RETRY_TIME = env.float("NEO4J_MAX_RETRY_TIME", default=3.0)
NEO4J_READ_TIMEOUT = env.float("NEO4J_READ_TIMEOUT", default=5.0)
NEO4J_WRITE_TIMEOUT = env.float("NEO4J_WRITE_TIMEOUT", default=60.0)
NEO4J_UNAVAILABLE_FOR = env.float("NEO4J_UNAVAILABLE_FOR", default=15.0)

CELERY_BROKER_URL = env("CELERY_BROKER_URL", default=REDIS_URL)
CELERY_RESULT_BACKEND = env("CELERY_RESULT_BACKEND", default=REDIS_URL)
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_ACKS_LATE = True  # and reject_on_worker_lost: see config/tasks.py TenantTask
# A broker that does not answer costs a write this long at most once its transaction committed.
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
    "socket_connect_timeout": env.float("CELERY_BROKER_CONNECT_TIMEOUT", default=2.0)
}
# kombu's Redis transport is not cluster-aware (no MOVED handling, multi-key BRPOP): on a cluster
# the broker and result keys all take this prefix, a hash tag such as "{engram-celery}:", so they
# share one slot, and CELERY_BROKER_URL / CELERY_RESULT_BACKEND name the master owning that slot.
CELERY_REDIS_KEYPREFIX = env("CELERY_REDIS_KEYPREFIX", default="")
if CELERY_REDIS_KEYPREFIX:
    CELERY_BROKER_TRANSPORT_OPTIONS["global_keyprefix"] = CELERY_REDIS_KEYPREFIX
    CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = {"global_keyprefix": CELERY_REDIS_KEYPREFIX}
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
# The outbox sweeper queues a drain for every tenant with pending rows: a fact change is projected
# within this many seconds (plus one drain) even when the task queued at its commit was lost.
ENGRAM_OUTBOX_SWEEP_SECONDS = env.float("ENGRAM_OUTBOX_SWEEP_SECONDS", default=30.0)
# Processed outbox rows are deleted this many hours after processing (hourly).
ENGRAM_OUTBOX_RETENTION_HOURS = env.float("ENGRAM_OUTBOX_RETENTION_HOURS", default=24.0)
# Memories written with "write": "async" are embedded by a task queued at commit; this sweep queues
# one for every tenant with pending memories, so one is searchable within this many seconds plus a
# batch even when that task was lost.
ENGRAM_ASYNC_EMBED_SWEEP_SECONDS = env.float("ENGRAM_ASYNC_EMBED_SWEEP_SECONDS", default=10.0)
# The first async write of a burst queues the worker's drain to start this many seconds later; the
# writes committed meanwhile join its batch (services.writes.embed_schedule): one task per burst.
ENGRAM_ASYNC_EMBED_DELAY_SECONDS = env.float("ENGRAM_ASYNC_EMBED_DELAY_SECONDS", default=0.25)
# recalls restart the clocks of the memories they return through a Redis buffer the worker applies
# this many seconds after the first recall of a quiet period; beat sweeps what a lost task left
ENGRAM_TOUCH_FLUSH_SECONDS = env.float("ENGRAM_TOUCH_FLUSH_SECONDS", default=2.0)
ENGRAM_TOUCH_SWEEP_SECONDS = env.float("ENGRAM_TOUCH_SWEEP_SECONDS", default=30.0)
# How often beat asks every tenant whether its consolidation pass is due (the interval itself is per
# tenant: consolidation_interval_hours in its policy).
ENGRAM_CONSOLIDATION_BEAT_SECONDS = env.float("ENGRAM_CONSOLIDATION_BEAT_SECONDS", default=3600.0)
# How often beat deletes the store items whose TTL ran out (reads leave them out before that).
ENGRAM_STORE_SWEEP_SECONDS = env.float("ENGRAM_STORE_SWEEP_SECONDS", default=300.0)
# How often each tenant's chain is checked incrementally (new events, and a share of the older ones),
# and the time within which every older event is re-verified: a change to any row is named within
# ENGRAM_CHAIN_RECHECK_SECONDS + ENGRAM_CHAIN_CHECK_SECONDS while the worker and beat run.
ENGRAM_CHAIN_CHECK_SECONDS = env.float("ENGRAM_CHAIN_CHECK_SECONDS", default=60.0)
ENGRAM_CHAIN_RECHECK_SECONDS = env.float("ENGRAM_CHAIN_RECHECK_SECONDS", default=600.0)
CELERY_BEAT_SCHEDULE = {
    "expire-store-items": {
        "task": "core.tasks.each_tenant",
        "args": ["memory.store.tasks.expire_items"],
        "schedule": ENGRAM_STORE_SWEEP_SECONDS,
        "options": {"expires": ENGRAM_STORE_SWEEP_SECONDS},
    },
    # per-tenant tasks are queued for every tenant by core.tasks.each_tenant
    "purge-idempotency-keys": {
        "task": "core.tasks.each_tenant",
        "args": ["agents.tasks.purge_expired_idempotency_keys"],
        "schedule": 3600.0,
    },
    "verify-episodic-chains": {
        "task": "core.tasks.each_tenant",
        "args": ["compliance.tasks.chain_check_nightly"],
        "schedule": 24 * 3600.0,
    },
    # new events verified and older ones re-verified in rotation (compliance.services.chain_check_scheduled)
    "verify-chains-incrementally": {
        "task": "core.tasks.each_tenant",
        "args": ["compliance.tasks.chain_check_scheduled"],
        "schedule": ENGRAM_CHAIN_CHECK_SECONDS,
        "options": {"expires": ENGRAM_CHAIN_CHECK_SECONDS},
    },
    # the chain head of every tenant signed (when it moved) and kept apart from the rows it covers
    "anchor-chain-heads": {
        "task": "core.tasks.each_tenant",
        "args": ["compliance.tasks.anchor_head"],
        "schedule": env.float("ENGRAM_ANCHOR_SECONDS", default=300.0),
    },
    "sweep-graph-outbox": {
        "task": "memory.knowledge.tasks.outbox_sweep",
        "schedule": ENGRAM_OUTBOX_SWEEP_SECONDS,
        # a sweep not run by the next one is of no use: it must not pile up behind a stopped worker
        "options": {"expires": ENGRAM_OUTBOX_SWEEP_SECONDS},
    },
    "consolidate-memories": {
        # each tenant's pass runs when its policy's consolidation_interval_hours has passed
        "task": "core.tasks.each_tenant",
        "args": ["memory.consolidation.tasks.consolidate"],
        "schedule": ENGRAM_CONSOLIDATION_BEAT_SECONDS,
        "options": {"expires": ENGRAM_CONSOLIDATION_BEAT_SECONDS},
    },
    "flush-recall-touches": {
        "task": "memory.semantic.tasks.touches_sweep",
        "schedule": ENGRAM_TOUCH_SWEEP_SECONDS,
        "options": {"expires": ENGRAM_TOUCH_SWEEP_SECONDS},
    },
    "embed-pending-memories": {
        "task": "memory.semantic.tasks.pending_sweep",
        "schedule": ENGRAM_ASYNC_EMBED_SWEEP_SECONDS,
        "options": {"expires": ENGRAM_ASYNC_EMBED_SWEEP_SECONDS},
    },
    "purge-graph-outbox": {
        "task": "core.tasks.each_tenant",
        "args": ["memory.knowledge.tasks.outbox_purge_processed"],
        "schedule": 3600.0,
    },
    # the retention rules of every tenant, applied in bounded batches (compliance.lifecycle)
    "apply-retention": {
        "task": "core.tasks.each_tenant",
        "args": ["compliance.tasks.retention_daily"],
        "schedule": env.float("ENGRAM_RETENTION_SECONDS", default=24 * 3600.0),
    },
}

# --- i18n / time ------------------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
FORMAT_MODULE_PATH = ["config.formats"]
# django-tenants colours admin app headers by shared/tenant app; the admin is clearer without it
TENANT_COLOR_ADMIN_APPS = False

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "var" / "static"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

# --- API ----------------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["agents.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["agents.permissions.HasScope"],
    "DEFAULT_PARSER_CLASSES": ["api.parsers.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "api.exceptions.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "api.schema.EngramAutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Engram API",
    "DESCRIPTION": "Memory for multi-agent AI systems: the episodic log, semantic memory, knowledge, "
    "working memory and checkpoints. Every request carries a per-agent API key "
    "(`Authorization: Bearer egm.<tenant>.<key id>.<secret>`); conventions (envelopes, status codes, "
    "errors) are in the REST guide of the documentation (docs/guides/agents/rest.md).",
    "VERSION": "1.0.0",
    "OAS_VERSION": "3.1.0",
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,  # input and output shapes of one serializer are different schemas
    "ENUM_NAME_OVERRIDES": {
        "FactStatusEnum": "memory.knowledge.models.FactStatus",
        "ContradictionStatusEnum": "memory.knowledge.models.ContradictionStatus",
        "MemoryScopeEnum": "memory.semantic.models.MemoryScope",
        "MemoryTypeEnum": "memory.semantic.models.MemoryType",
        "EventKindEnum": "memory.episodic.models.EventKind",
        "EventRoleEnum": "memory.episodic.models.EventRole",
        "ConversationScopeEnum": ["private", "shared"],
    },
    "SWAGGER_UI_DIST": "SIDECAR",  # no CDN: the UI's files come from drf-spectacular-sidecar
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # the document's component schemas are shown with each operation; a list of all of them below
    # the operations is more for the browser to build on every visit (docs/decisions/0086)
    "SWAGGER_UI_SETTINGS": {"defaultModelsExpandDepth": -1},
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "api.schema.add_stream_operation",
        "api.schema.add_links",
        "api.schema.batch_limits",
        "api.schema.bodies_required",
        "api.schema.json_query_parameters",
        "api.schema.any_value_includes_null",
    ],
    "TAGS": [
        {"name": "agents", "description": "The caller and its key."},
        {"name": "episodic", "description": "The append-only, hash-chained log of what happened."},
        {"name": "semantic", "description": "Memories with embeddings, and hybrid recall."},
        {
            "name": "knowledge",
            "description": "Facts with provenance and valid time, the graph, contradictions.",
        },
        {
            "name": "working memory",
            "description": "Blackboards, scratchpads and conversation windows (Redis).",
        },
        {"name": "checkpoints", "description": "Agent state per session step (state hydration)."},
        {
            "name": "store",
            "description": "LangGraph's long-term store: JSON items by namespace and key, searched by "
            "hybrid recall (tenant-wide).",
        },
        {"name": "procedural", "description": "Tools (JSON Schema contracts) and versioned skills."},
        {
            "name": "context",
            "description": "The context of an agent's step, across layers, within a token budget.",
        },
    ],
}

# 1 MiB of request body is plenty for a batch of 1,000 events of normal size; content fields have
# their own limits.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("ENGRAM_MAX_BODY_BYTES", default=16 * 1024 * 1024)

# --- Engram --------------------------------------------------------------------------------------------
_LOCAL_MINILM = BASE_DIR.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx"
ENGRAM = {
    # "fastembed", "model2vec" or "openai"
    "EMBEDDER": env("ENGRAM_EMBEDDER", default="fastembed"),
    "EMBEDDING_MODEL": env("ENGRAM_EMBEDDING_MODEL", default="sentence-transformers/all-MiniLM-L6-v2"),
    # a local model folder; empty means "let the library fetch it by name"
    "EMBEDDING_MODEL_PATH": env(
        "ENGRAM_EMBEDDING_MODEL_PATH", default=str(_LOCAL_MINILM) if _LOCAL_MINILM.exists() else ""
    ),
    "EMBEDDING_DIMENSIONS": env.int("ENGRAM_EMBEDDING_DIMENSIONS", default=0),  # 0: ask the model
    # ONNX Runtime threads per embedding call; 0: one per physical core. 1 by default: the runtime's
    # pool spins on its cores after each run, taking them from PostgreSQL and the other workers, so
    # on a busy server one thread embeds faster; 0 suits a machine that does nothing else
    # (decision 0043).
    "EMBEDDING_THREADS": env.int("ENGRAM_EMBEDDING_THREADS", default=1),
    "OPENAI_BASE_URL": env("ENGRAM_OPENAI_BASE_URL", default=""),
    # seconds an OpenAI-compatible embeddings call may take before recall and writes answer 503
    "EMBEDDING_TIMEOUT": env.float("ENGRAM_EMBEDDING_TIMEOUT", default=10.0),
    "OPENAI_API_KEY": env_secret("ENGRAM_OPENAI_API_KEY", "") or "",
    "MAX_CONTENT_CHARS": env.int("ENGRAM_MAX_CONTENT_CHARS", default=32_000),
    "MAX_EVENT_BATCH": 1000,
    # memories per POST /api/v1/memories batch (one embedder call, one transaction)
    "MAX_MEMORY_BATCH": 500,
    "IDEMPOTENCY_TTL_HOURS": env.int("ENGRAM_IDEMPOTENCY_TTL_HOURS", default=24),
    # /metrics: with a token, every scraper sends "Authorization: Bearer <token>"; without one,
    # loopback clients may read it only where METRICS_LOOPBACK is on (never in production)
    "METRICS_TOKEN": env_secret("ENGRAM_METRICS_TOKEN", "") or "",
    # an OpenAI-compatible chat endpoint for abstractive summaries and fact extraction (optional)
    "LLM_BASE_URL": env("ENGRAM_LLM_BASE_URL", default=""),
    "LLM_MODEL": env("ENGRAM_LLM_MODEL", default="gpt-4o-mini"),
    "LLM_API_KEY": env_secret("ENGRAM_LLM_API_KEY", "") or "",
    "LLM_TIMEOUT": env.float("ENGRAM_LLM_TIMEOUT", default=30.0),
    # rows per batch (one transaction each) of the consolidation jobs
    "CONSOLIDATION_BATCH": env.int("ENGRAM_CONSOLIDATION_BATCH", default=5000),
    "METRICS_LOOPBACK": env.bool("ENGRAM_METRICS_LOOPBACK", default=True),
    # Ed25519 private key (PEM, PKCS #8) signing chain anchors and export manifests
    "SIGNING_KEY": env_secret("ENGRAM_SIGNING_KEY", "") or "",
    # its public half (PEM): all that checking anchors, redactions and exports needs (verify_chain);
    # empty: derived from SIGNING_KEY
    "SIGNING_PUBLIC_KEY": env_secret("ENGRAM_SIGNING_PUBLIC_KEY", "") or "",
    # where each anchor is also sent: a file (one JSON line per anchor) or an http(s) URL (POST)
    "ANCHOR_SINK": env("ENGRAM_ANCHOR_SINK", default=""),
    "ANCHOR_SINK_TIMEOUT": env.float("ENGRAM_ANCHOR_SINK_TIMEOUT", default=5.0),
    # compliance export archives, one folder per tenant
    "EXPORT_DIR": env("ENGRAM_EXPORT_DIR", default=str(BASE_DIR / "var" / "exports")),
    # Tenant isolation by the database (core/tenancy.py): each unit of work runs as its tenant's
    # role, the public schema's work as the maintenance role. Off: search_path only (for measuring).
    "TENANT_ROLES": env.bool("ENGRAM_TENANT_ROLES", default=True),
    # ...and connects as that role: each tenant's role is a login of its own whose password only the
    # application can derive, so SQL run in a tenant's unit cannot become another tenant
    # (docs/decisions/0001-tenant-logins.md). Off: the shared login switches with SET ROLE.
    "TENANT_LOGINS": env.bool("ENGRAM_TENANT_LOGINS", default=True),
    # the other PostgreSQL servers tenants may live on (decision 0071): "alias=postgres://..." pairs
    # separated by spaces; a tenant's row names its server (Tenant.database, "default": DATABASE_URL's)
    "DB_SERVERS": {
        alias: _server_settings(url)
        for alias, _, url in (pair.partition("=") for pair in env("ENGRAM_DB_SERVERS", default="").split())
    },
    # the tenants' login passwords are derived from this (empty: from SECRET_KEY); after changing
    # it, run manage.py tenant_logins_sync
    "DB_TENANT_SECRET": env_secret("ENGRAM_DB_TENANT_SECRET", "") or "",
    # with DATABASE_POOL, each tenant's login has a pool per process: up to max_size connections,
    # none kept open longer than max_idle seconds unused
    "TENANT_POOL": {
        "max_size": env.int("DATABASE_TENANT_POOL_MAX_SIZE", default=4),
        "max_idle": env.float("DATABASE_TENANT_POOL_MAX_IDLE", default=60.0),
    },
    "DB_MAINTENANCE_ROLE": env("ENGRAM_DB_MAINTENANCE_ROLE", default="engram_maint"),
    # empty: "<database name>_t_" (roles are per cluster; the prefix keeps databases apart)
    "DB_TENANT_ROLE_PREFIX": env("ENGRAM_DB_TENANT_ROLE_PREFIX", default=""),
    # context assembly's token counters: name -> a tokenizer.json (Hugging Face `tokenizers` format),
    # e.g. ENGRAM_TOKENIZERS="llama3=/models/llama3/tokenizer.json"; a tenant picks one by name
    # (Tenant.context_tokenizer). "minilm" (the default) is all-MiniLM-L6-v2's WordPiece tokenizer.
    "TOKENIZERS": {
        "minilm": env("ENGRAM_TOKENIZER_PATH", default=str(_LOCAL_MINILM / "tokenizer.json")),
        **env.dict("ENGRAM_TOKENIZERS", default={}),
    },
    "DEFAULT_TOKENIZER": env("ENGRAM_DEFAULT_TOKENIZER", default="minilm"),
    "CHAIN_CHECK_SECONDS": ENGRAM_CHAIN_CHECK_SECONDS,
    "CHAIN_RECHECK_SECONDS": ENGRAM_CHAIN_RECHECK_SECONDS,
    # the fewest older events a scheduled check re-verifies (a small log is re-verified whole each time)
    "CHAIN_RECHECK_MIN_ROWS": env.int("ENGRAM_CHAIN_RECHECK_MIN_ROWS", default=10_000),
    # rows per transaction of retention passes and erasures (each batch commits with its progress)
    "LIFECYCLE_BATCH": env.int("ENGRAM_LIFECYCLE_BATCH", default=1000),
    # an erasure's receipt says the backups (and WAL archive) hold erased rows until this many days
    # after it: set it to the backups' real retention
    "BACKUP_RETENTION_DAYS": env.int("ENGRAM_BACKUP_RETENTION_DAYS", default=35),
    # PostgreSQL's client programs (pg_dump, pg_restore) for a tenant's backup and restore; empty:
    # PATH. At least the server's major version (the development stack sets its server's).
    "PG_BIN_DIR": env("ENGRAM_PG_BIN_DIR", default=""),
    # seconds an erasure waits for Redis to rewrite its append-only file and snapshot
    "REDIS_REWRITE_TIMEOUT": env.float("ENGRAM_REDIS_REWRITE_TIMEOUT", default=600.0),
    # /readyz: seconds it waits for its dependencies; whether Neo4j being down makes it a 503
    "READINESS_TIMEOUT": env.float("ENGRAM_READINESS_TIMEOUT", default=1.0),
    "READINESS_NEO4J_REQUIRED": env.bool("ENGRAM_READINESS_NEO4J_REQUIRED", default=False),
}

# DJANGO_LOG_FORMAT=json: one JSON object per line with request id and tenant (core.logs)
LOG_FORMAT = env("DJANGO_LOG_FORMAT", default="text")
# JSON lines: the worker keeps this LOGGING instead of Celery's own format on the root logger
CELERY_WORKER_HIJACK_ROOT_LOGGER = LOG_FORMAT != "json"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "core.logs.JsonFormatter"}, "text": {"format": "%(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": env("DJANGO_LOG_LEVEL", default="INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # the MCP SDK logs every request and stateless session at INFO
        "mcp": {"level": "WARNING"},
    },
}
