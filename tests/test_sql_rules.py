"""Every SQL-resident rule has one source file, and the database holds what the files say.

- Each ``<app>/sql/<name>.sql`` is the version its app's latest ``ApplySqlRule`` of that rule applies
  (editing a file without a migration fails here), and every version a migration applies is still
  kept (``core.sqlrules``).
- The database the migrations built holds each file's definitions: applying the file to it, the way
  a migration would, changes no function and no trigger (PostgreSQL's own rendering of both,
  ``pg_get_functiondef`` / ``pg_get_triggerdef``, compared with runs of white space made one).
- Every function and trigger of the project in a tenant's schema and in ``public`` has its file: a
  new rule cannot skip the registry.
- No migration pastes a rule: every function a migration creates or replaces comes from a file or
  its history through ``ApplySqlRule``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.apps import apps
from django.db import DatabaseError, connection, migrations, transaction
from django.db.migrations.loader import MigrationLoader
from django_tenants.utils import tenant_context

from core.sqlrules import (
    Applied,
    ApplySqlRule,
    SqlRuleMissing,
    applied_rules,
    defined_names,
    rule_digest,
    rule_files,
    rule_text,
    shown,
)
from core.tenancy import maintenance
from tenants.models import Tenant

# The functions django-tenants installs in ``public`` for itself (schema cloning).
TENANTS_OWN = {"clone_schema"}

# Every function and non-internal trigger of one schema, keyed by what it is, with its definition;
# members of extensions (pgvector's) are not the project's.
SCHEMA_OBJECTS_SQL = """
SELECT 'function ' || p.oid::regprocedure::text, p.proname, pg_get_functiondef(p.oid)
FROM pg_proc p
WHERE p.pronamespace = %(schema)s::regnamespace AND p.prokind IN ('f', 'p')
  AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                  AND d.deptype = 'e')
UNION ALL
SELECT 'trigger ' || t.tgname || ' on ' || c.relname, t.tgname, pg_get_triggerdef(t.oid)
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
WHERE c.relnamespace = %(schema)s::regnamespace AND NOT t.tgisinternal
"""


def rule_apps() -> list[str]:
    """The labels of the project's apps that have rule files."""
    return [config.label for config in apps.get_app_configs() if rule_files(config.label)]


def all_rule_files() -> Iterator[tuple[str, str, Path]]:
    for app_label in rule_apps():
        for name, path in rule_files(app_label).items():
            yield app_label, name, path


def latest_applied() -> dict[tuple[str, str], Applied]:
    latest: dict[tuple[str, str], Applied] = {}
    for applied in applied_rules():
        latest[(applied.app_label, applied.name)] = applied
    return latest


def test_the_registry_finds_the_rules() -> None:
    names = {name for _, name, _ in all_rule_files()}
    assert {"memory_checkpoint_save", "engram_event_redaction_only", "compliance_anchor_append_only"} <= names


def test_every_rule_file_is_what_its_latest_migration_applies() -> None:
    latest = latest_applied()
    problems = []
    for app_label, name, path in all_rule_files():
        digest = rule_digest(path.read_text(encoding="utf-8"))
        applied = latest.get((app_label, name))
        if applied is None:
            problems.append(
                f"{shown(app_label)}/{name}.sql: no migration applies it: write a migration with "
                f'ApplySqlRule("{name}", "{digest}", reverse_sql="DROP ...")'
            )
        elif applied.digest != digest:
            kept = f"{shown(app_label)}/history/{name}.{applied.digest}.sql"
            problems.append(
                f"{shown(app_label)}/{name}.sql is version {digest}, but the latest migration that applies "
                f"it, {applied.migration}, applies version {applied.digest}: write a migration with "
                f'ApplySqlRule("{name}", "{digest}", previous="{applied.digest}"), and keep the text '
                f"it replaces as {kept} (git show HEAD:{shown(app_label)}/{name}.sql > {kept})"
            )
    assert not problems, "\n".join(problems)


def test_every_version_a_migration_applies_is_kept() -> None:
    problems = []
    for applied in applied_rules():
        for digest in filter(None, (applied.digest, applied.previous)):
            try:
                rule_text(applied.app_label, applied.name, digest)
            except SqlRuleMissing as missing:
                problems.append(f"{applied.migration}: {missing}")
    assert not problems, "\n".join(problems)


PASTED_FUNCTION = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+(\w+)", re.IGNORECASE)


def pasted_functions(loader: MigrationLoader) -> list[str]:
    """``app.migration: function`` for every function that a ``RunSQL`` (not an ``ApplySqlRule``) of a
    project migration creates, forwards or backwards."""
    pasted = []
    for (app_label, name), migration in sorted(loader.disk_migrations.items()):
        if app_label not in rule_apps():
            continue
        for operation in migration.operations:
            if not isinstance(operation, migrations.RunSQL) or isinstance(operation, ApplySqlRule):
                continue
            for sql in (operation.sql, operation.reverse_sql):
                texts = sql if isinstance(sql, list | tuple) else [sql]
                for text in texts:
                    text = text[0] if isinstance(text, list | tuple) else text
                    for function in PASTED_FUNCTION.findall(text or ""):
                        pasted.append(f"{app_label}.{name}: {function}")
    return pasted


def test_no_migration_pastes_a_rule() -> None:
    pasted = pasted_functions(MigrationLoader(None, ignore_no_migrations=True))
    assert not pasted, (
        "migrations that create a function in their own SQL: apply it with core.sqlrules.ApplySqlRule "
        "(its text in <app>/sql/<name>.sql, or in <app>/sql/history/<name>.<digest>.sql once the file "
        "has moved on)\n  " + "\n  ".join(pasted)
    )


def test_each_file_defines_the_rule_it_is_named_after() -> None:
    problems = []
    for app_label, name, path in all_rule_files():
        functions, triggers = defined_names(path.read_text(encoding="utf-8"))
        if name not in functions and not (name in triggers and not functions):
            problems.append(
                f"{shown(app_label)}/{name}.sql defines functions {sorted(functions)} and triggers "
                f"{sorted(triggers)}: it must define the function {name} (with the triggers that bind "
                "it), or only triggers, one of them named so"
            )
    assert not problems, "\n".join(problems)


def schema_objects(schema: str) -> dict[str, tuple[str, str]]:
    """What ``SCHEMA_OBJECTS_SQL`` finds in ``schema``: key -> (name, definition)."""
    with connection.cursor() as cursor:
        cursor.execute(SCHEMA_OBJECTS_SQL, {"schema": schema})
        return {key: (name, definition) for key, name, definition in cursor.fetchall()}


def same(a: str, b: str) -> bool:
    """Equal but for the white space between words."""
    return a.split() == b.split()


def drift(schema: str, text: str) -> list[str]:
    """What applying ``text`` as a migration would (its statements one by one) changes among the
    functions and triggers of ``schema``; undone before returning."""
    before = schema_objects(schema)
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                for statement in connection.ops.prepare_sql_script(text):
                    cursor.execute(statement)
            after = schema_objects(schema)
            transaction.set_rollback(True)
    except DatabaseError as error:
        return [f"applying it fails: {error}".strip()]
    changes = []
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        if old is not None and new is not None and same(old[1], new[1]):
            continue
        if old is None:
            changes.append(f"{key} would be created")
        elif new is None:
            changes.append(f"{key} would go")
        else:
            diff = difflib.unified_diff(
                old[1].splitlines(), new[1].splitlines(), "database", "file", n=1, lineterm=""
            )
            changes.append(f"{key} differs:\n    " + "\n    ".join(diff))
    return changes


@pytest.mark.django_db
def test_the_database_holds_every_rule_file(tenant_a: Tenant) -> None:
    problems = []
    with tenant_context(tenant_a), maintenance():  # as the migrations run
        for app_label, name, path in all_rule_files():
            changes = drift(tenant_a.schema_name, path.read_text(encoding="utf-8"))
            if changes:
                problems.append(
                    f"{shown(app_label)}/{name}.sql is not what the migrations left in the database: "
                    "write a migration that applies it (core/sqlrules.py says how)\n  " + "\n  ".join(changes)
                )
    assert not problems, "\n".join(problems)


def without_file(schemas: tuple[str, ...]) -> list[str]:
    """The functions and triggers of ``schemas`` that no rule file defines (django-tenants' own
    functions aside), as ``schema: key``."""
    functions: set[str] = set(TENANTS_OWN)
    triggers: set[str] = set()
    for _, _, path in all_rule_files():
        found_functions, found_triggers = defined_names(path.read_text(encoding="utf-8"))
        functions |= found_functions
        triggers |= found_triggers
    missing = []
    for schema in schemas:
        for key, (name, _) in sorted(schema_objects(schema).items()):
            if name not in (functions if key.startswith("function ") else triggers):
                missing.append(f"{schema}: {key}")
    return missing


@pytest.mark.django_db
def test_every_function_and_trigger_of_the_project_has_its_file(tenant_a: Tenant) -> None:
    missing = without_file((tenant_a.schema_name, "public"))
    assert not missing, (
        "database functions and triggers without a rule file (<app>/sql/<name>.sql, applied by "
        "core.sqlrules.ApplySqlRule in a migration):\n  " + "\n  ".join(missing)
    )


@pytest.mark.django_db
def test_a_function_or_trigger_without_a_file_is_found(tenant_a: Tenant) -> None:
    with tenant_context(tenant_a), maintenance(), connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION engram_unfiled() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$; "
            "CREATE TRIGGER memory_event_unfiled AFTER INSERT ON memory_event "
            "FOR EACH STATEMENT EXECUTE FUNCTION engram_unfiled()"
        )
        missing = without_file((tenant_a.schema_name,))
    assert missing == [
        f"{tenant_a.schema_name}: function engram_unfiled()",
        f"{tenant_a.schema_name}: trigger memory_event_unfiled on memory_event",
    ]


@pytest.mark.django_db
def test_the_comparison_sees_a_changed_body_or_trigger_but_not_white_space(tenant_a: Tenant) -> None:
    with tenant_context(tenant_a), maintenance():
        objects = schema_objects(tenant_a.schema_name)
        save = next(
            definition for key, (name, definition) in objects.items() if name == "memory_checkpoint_save"
        )
        lexical = objects["trigger semantic_lexical_set on memory_semanticmemory"][1].replace(
            "CREATE TRIGGER", "CREATE OR REPLACE TRIGGER", 1
        )
        body = drift(tenant_a.schema_name, save.replace("\nBEGIN\n", "\nBEGIN\n    -- changed\n", 1))
        trigger = drift(tenant_a.schema_name, lexical.replace("INSERT OR UPDATE OF content", "INSERT"))
        spaces = drift(tenant_a.schema_name, save.replace("\nBEGIN\n", "\n  BEGIN  \n\n", 1))
    assert "\nBEGIN\n" in save and "INSERT OR UPDATE OF content" in lexical
    assert len(body) == 1 and "\n    +    -- changed\n" in body[0], body
    assert len(trigger) == 1 and trigger[0].startswith(
        "trigger semantic_lexical_set on memory_semanticmemory"
    ), trigger
    assert spaces == []


# A tenant schema's SQL-language functions (not pgvector's) with their argument types.
SQL_FUNCTIONS_SQL = """
SELECT p.proname, p.oid::regprocedure::text, ARRAY(SELECT format_type(t, NULL) FROM unnest(p.proargtypes) AS t)
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
WHERE p.pronamespace = %(schema)s::regnamespace AND l.lanname = 'sql'
  AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                  AND d.deptype = 'e')
"""


@pytest.mark.django_db
def test_every_sql_function_is_inlined_where_it_is_called(tenant_a: Tenant) -> None:
    """A ``LANGUAGE sql`` rule is inlined into the statement that calls it (a ``RETURN`` expression),
    or it is written in plpgsql: a SQL function that cannot be inlined (a body with a ``FROM``) is
    parsed and planned again by every statement that calls it, a trigger's on every insert, while
    plpgsql keeps its plans for the connection (decision 0118). Each is called on values the planner
    cannot fold; an inlined function leaves no call in the plan."""
    problems = []
    with tenant_context(tenant_a), connection.cursor() as cursor:
        cursor.execute(SQL_FUNCTIONS_SQL, {"schema": tenant_a.schema_name})
        functions = cursor.fetchall()
        assert {name for name, _, _ in functions} >= {"memory_bm25_saturation", "memory_lexeme_index"}
        for name, signature, types in functions:
            args = ", ".join(f"CASE WHEN g > 0 THEN NULL::{t} END" for t in types)
            cursor.execute(f"EXPLAIN (VERBOSE, COSTS OFF) SELECT {name}({args}) FROM generate_series(1, 2) g")
            plan = "\n".join(row[0] for row in cursor.fetchall())
            if f"{name}(" in plan:
                problems.append(f"{signature} is not inlined (write it as plpgsql):\n{plan}")
    assert not problems, "\n".join(problems)
