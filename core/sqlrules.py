"""SQL-resident rules: one file per database function (and the triggers that bind it), applied by
migrations by digest.

A rule's current definition is ``<app>/sql/<name>.sql``: ``CREATE OR REPLACE FUNCTION <name>`` and
``CREATE OR REPLACE TRIGGER`` statements, so the file can be applied again at any time. A file that
holds triggers only is named after one of them. A migration applies one version of a rule with
``ApplySqlRule(name, digest)``: the text whose digest (``rule_digest``) is ``digest``, read from the
file while the file holds it and from ``<app>/sql/history/<name>.<digest>.sql`` once the file has
moved on. So an old migration keeps applying the text it was written for, each version of a rule is
stored once, and no migration pastes a rule.

Changing a rule: keep the applied text (``git mv`` is wrong here: copy it, e.g.
``git show HEAD:memory/sql/x.sql > memory/sql/history/x.<old digest>.sql``), edit the file, and
write a migration with ``ApplySqlRule("x", "<new digest>", previous="<old digest>")``.
``tests/test_sql_rules.py`` fails until both are there, and holds the database built by the
migrations equal to the files.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.apps import apps as global_apps
from django.db import migrations, router
from django.db.migrations.loader import MigrationLoader

DIGEST_LENGTH = 16
DEFINED = re.compile(r"CREATE OR REPLACE (FUNCTION|TRIGGER)\s+(\w+)", re.IGNORECASE)


class SqlRuleMissing(LookupError):
    """A migration names a version of a rule that neither the file nor its history holds."""


def rule_digest(text: str) -> str:
    """The first ``DIGEST_LENGTH`` hex digits of the SHA-256 of ``text`` (UTF-8)."""
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_LENGTH]


def rules_dir(app_label: str) -> Path:
    """``<app>/sql``: where ``app_label``'s rule files live (it may not exist)."""
    return Path(global_apps.get_app_config(app_label).path) / "sql"


def rule_files(app_label: str) -> dict[str, Path]:
    """Rule name -> its current file, for every ``<app>/sql/*.sql`` of ``app_label``."""
    return {path.stem: path for path in sorted(rules_dir(app_label).glob("*.sql"))}


def history_path(app_label: str, name: str, digest: str) -> Path:
    """Where the version ``digest`` of rule ``name`` is kept once its file has moved on."""
    return rules_dir(app_label) / "history" / f"{name}.{digest}.sql"


def rule_text(app_label: str, name: str, digest: str) -> str:
    """The text of version ``digest`` of rule ``name`` of ``app_label``: the file's, else the kept
    one. Raises ``SqlRuleMissing`` when neither has that digest."""
    current = rules_dir(app_label) / f"{name}.sql"
    for path in (current, history_path(app_label, name, digest)):
        if path.exists():
            text = path.read_text(encoding="utf-8")
            if rule_digest(text) == digest:
                return text
    kept = f"{shown(app_label)}/history/{name}.{digest}.sql"
    raise SqlRuleMissing(
        f"a migration applies version {digest} of {shown(app_label)}/{name}.sql, which the file no "
        f"longer holds: keep that text as {kept} (git show <commit>:{shown(app_label)}/{name}.sql > "
        f"{kept}) and write a migration that applies the file's current text"
    )


def shown(app_label: str) -> str:
    """``<app folder>/sql``, as messages name the rules' folder."""
    return f"{rules_dir(app_label).parent.name}/sql"


def defined_names(text: str) -> tuple[set[str], set[str]]:
    """The (functions, triggers) a rule text defines with ``CREATE OR REPLACE``."""
    functions: set[str] = set()
    triggers: set[str] = set()
    for kind, name in DEFINED.findall(text):
        (functions if kind.upper() == "FUNCTION" else triggers).add(name)
    return functions, triggers


def run_script(schema_editor: Any, sql: str) -> None:
    """Execute ``sql`` statement by statement through ``schema_editor``, as ``RunSQL`` does."""
    for statement in schema_editor.connection.ops.prepare_sql_script(sql):
        schema_editor.execute(statement, params=None)


class ApplySqlRule(migrations.RunSQL):
    """Apply version ``digest`` of the migration's app's rule ``name`` (see the module docstring).

    Reversed by applying version ``previous`` of the same rule, or by ``reverse_sql`` (a ``DROP``
    for a new rule, ``RunSQL.noop`` when the database already held this definition): one of the two
    must be given. The text is read when the operation runs, so loading the migrations never needs
    the files.
    """

    def __init__(
        self,
        name: str,
        digest: str,
        *,
        previous: str | None = None,
        reverse_sql: str | None = None,
        hints: dict[str, Any] | None = None,
    ) -> None:
        if (previous is None) == (reverse_sql is None):
            raise ValueError(f"ApplySqlRule({name!r}): give previous (a digest) or reverse_sql, one of them")
        self.name = name
        self.digest = digest
        self.previous = previous
        self.undo_sql = reverse_sql or ""
        super().__init__(sql=migrations.RunSQL.noop, reverse_sql=self.undo_sql, hints=hints)

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        kwargs: dict[str, Any] = {}
        if self.previous is not None:
            kwargs["previous"] = self.previous
        else:
            kwargs["reverse_sql"] = self.undo_sql
        if self.hints:
            kwargs["hints"] = self.hints
        return (f"{__name__}.{type(self).__qualname__}", [self.name, self.digest], kwargs)

    def describe(self) -> str:
        return f"Apply SQL rule {self.name} ({self.digest})"

    def database_forwards(self, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        if router.allow_migrate(schema_editor.connection.alias, app_label, **self.hints):
            run_script(schema_editor, rule_text(app_label, self.name, self.digest))

    def database_backwards(self, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        if router.allow_migrate(schema_editor.connection.alias, app_label, **self.hints):
            if self.previous is not None:
                run_script(schema_editor, rule_text(app_label, self.name, self.previous))
            elif self.undo_sql:
                run_script(schema_editor, self.undo_sql)


@dataclass(frozen=True)
class Applied:
    """One ``ApplySqlRule`` of a migration: ``migration`` is ``app.name``."""

    app_label: str
    migration: str
    name: str
    digest: str
    previous: str | None


def applied_rules(loader: MigrationLoader | None = None) -> Iterator[Applied]:
    """Every ``ApplySqlRule`` of every project migration on disk, in the order the migrations run
    (so the last one of a rule is the version a migrated database holds)."""
    loader = loader or MigrationLoader(None, ignore_no_migrations=True)
    seen: set[tuple[str, str]] = set()
    for leaf in sorted(loader.graph.leaf_nodes()):
        for key in loader.graph.forwards_plan(leaf):
            if key in seen or key not in loader.disk_migrations:
                continue
            seen.add(key)
            for operation in loader.disk_migrations[key].operations:
                if isinstance(operation, ApplySqlRule):
                    yield Applied(
                        app_label=key[0],
                        migration=f"{key[0]}.{key[1]}",
                        name=operation.name,
                        digest=operation.digest,
                        previous=operation.previous,
                    )
