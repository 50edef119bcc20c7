"""The settings and commands reference, read from the code (an MkDocs hook, and the source of the
test that fails when a setting or a command has no description: tests/docs/test_reference.py).

A setting is every environment variable ``config/settings/*.py`` reads (``env(...)``,
``env.bool(...)`` and the other casts, ``env_secret(...)``, which also takes ``<NAME>_FILE``). Its
description is the comment on its line or the comment lines just above its statement in the settings
module; a setting without one takes it from ``docs/reference/settings.toml``. A command is every
``manage.py`` command of the project's apps (its ``help``) and every ``./engram`` subcommand (its
argparse help).
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent.parent
SETTINGS_DIR = BASE_DIR / "config" / "settings"
DESCRIPTIONS = BASE_DIR / "docs" / "reference" / "settings.toml"
CASTS = {
    "bool",
    "int",
    "float",
    "list",
    "str",
    "url",
    "path",
    "json",
    "dict",
    "db",
    "db_url",
    "cache",
    "cache_url",
}
COMMAND_APPS = ("agents", "tenants", "memory", "compliance", "api", "benchmarks", "core")


@dataclass(frozen=True)
class Setting:
    """One environment variable the settings read: its name, type (``str``, ``bool``, ``int``, ...,
    ``secret`` for one that may come from ``<name>_FILE``), default (Python source, ``""`` when it has
    none), the module and line that read it, and its description (``""`` when none is found)."""

    name: str
    kind: str
    default: str
    module: str
    line: int
    description: str


def _comments_above(lines: list[str], index: int) -> str:
    """The comment lines just above ``lines[index]`` (0-based), joined; ``""`` when none."""
    above: list[str] = []
    n = index - 1
    while n >= 0 and lines[n].strip().startswith("#"):
        above.insert(0, lines[n].strip().lstrip("#").strip())
        n -= 1
    return " ".join(part for part in above if not part.startswith("---")).strip()


def _comment_for(lines: list[str], statement: ast.stmt, lineno: int) -> str:
    """The inline comment of line ``lineno``, else the comments just above it (or above the
    dictionary or call it opens a line of), else those above ``statement``."""
    line = lines[lineno - 1]
    if "  # " in line:
        return line.split("  # ", 1)[1].strip()
    index = lineno - 1
    while True:
        found = _comments_above(lines, index)
        if found:
            return found
        if (
            index > 0
            and lines[index - 1].rstrip().endswith(("{", "(", "["))
            and index - 1 >= statement.lineno - 1
        ):
            index -= 1
            continue
        break
    return _comments_above(lines, statement.lineno - 1)


def _read_call(call: ast.Call) -> tuple[str, str, str] | None:
    """(name, kind, default) when ``call`` reads an environment variable, else None."""
    func = call.func
    if isinstance(func, ast.Name) and func.id in {"env", "env_secret"}:
        kind = "secret" if func.id == "env_secret" else "str"
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "env":
        if func.attr not in CASTS:
            return None
        kind = func.attr
    else:
        return None
    if not call.args or not isinstance(call.args[0], ast.Constant) or not isinstance(call.args[0].value, str):
        return None
    default = next((ast.unparse(k.value) for k in call.keywords if k.arg == "default"), "")
    if not default and len(call.args) > 1:
        default = ast.unparse(call.args[1])
    return call.args[0].value, kind, default


def settings() -> list[Setting]:
    """Every environment variable the settings modules read, sorted by name (the first reading
    module wins for a name read twice), with its description."""
    described: dict[str, Any] = tomllib.loads(DESCRIPTIONS.read_text()) if DESCRIPTIONS.exists() else {}
    found: dict[str, Setting] = {}
    for module in sorted(SETTINGS_DIR.glob("*.py")):
        source = module.read_text()
        lines = source.splitlines()
        tree = ast.parse(source)
        for statement in ast.walk(tree):
            if not isinstance(statement, ast.stmt) or isinstance(statement, ast.FunctionDef | ast.Module):
                continue
            for node in ast.walk(statement):
                read = _read_call(node) if isinstance(node, ast.Call) else None
                if read is None or read[0] in found:
                    continue
                name, kind, default = read
                text = described.get(name, {}).get("text") or _comment_for(lines, statement, node.lineno)
                found[name] = Setting(name, kind, default, module.stem, node.lineno, text)
    return sorted(found.values(), key=lambda s: s.name)


@dataclass(frozen=True)
class Command:
    """A command: how it is run (``./engram manage NAME`` or ``./engram NAME``) and its help."""

    usage: str
    help: str
    source: str


def _help_of(path: Path) -> str:
    """The ``help`` class attribute of the ``Command`` class in ``path``, else the first paragraph of
    the module's docstring (a module that re-exports another's command); ``""`` when neither."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Command":
            for item in node.body:
                if (
                    isinstance(item, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "help" for t in item.targets)
                    and isinstance(item.value, ast.Constant)
                ):
                    return str(item.value.value)
    docstring = ast.get_docstring(tree) or ""
    return docstring.split("\n\n", 1)[0].replace("\n", " ").strip()


def commands() -> list[Command]:
    """Every ``./engram`` subcommand, then every management command of the project's apps."""
    import argparse
    import sys

    if str(BASE_DIR) not in sys.path:  # this checkout's devstack, whichever is installed
        sys.path.insert(0, str(BASE_DIR))
    from devstack.__main__ import parser

    found: list[Command] = []
    root = parser()
    for action in root._subparsers._group_actions if root._subparsers else []:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                found.append(Command(f"./engram {choice.dest}", choice.help or "", "devstack/__main__.py"))
    for app in COMMAND_APPS:
        for path in sorted((BASE_DIR / app).rglob("management/commands/*.py")):
            if path.name != "__init__.py":
                rel = path.relative_to(BASE_DIR).as_posix()
                found.append(Command(f"./engram manage {path.stem}", _help_of(path), rel))
    return found


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def settings_table() -> str:
    """The settings as one Markdown table."""
    rows = ["| variable | type | default | read in | what it does |", "|---|---|---|---|---|"]
    for s in settings():
        default = f"`{_cell(s.default)}`" if s.default else ""
        rows.append(
            f"| `{s.name}` | {s.kind} | {default} | `config/settings/{s.module}.py` | {_cell(s.description)} |"
        )
    return "\n".join(rows) + "\n"


def commands_table() -> str:
    """The commands as one Markdown table."""
    rows = ["| command | what it does | source |", "|---|---|---|"]
    for c in commands():
        rows.append(f"| `{c.usage}` | {_cell(c.help)} | `{c.source}` |")
    return "\n".join(rows) + "\n"


MARKERS = {"<!-- generated: settings -->": settings_table, "<!-- generated: commands -->": commands_table}


def on_page_markdown(markdown: str, **kwargs: object) -> str:
    """MkDocs hook: replace each generated-table marker with its table."""
    for marker, render in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    return markdown


def decisions_list() -> str:
    """Every decision record (``docs/decisions/NNNN-*.md``) as a list of links with its title."""
    items = []
    for path in sorted((BASE_DIR / "docs" / "decisions").glob("[0-9][0-9][0-9][0-9]-*.md")):
        first = path.read_text().splitlines()[0] if path.read_text() else path.stem
        title = first.lstrip("#").strip() or path.stem
        items.append(f"- [{title}]({path.name})")
    return "\n".join(items) + "\n"


MARKERS["<!-- generated: decisions -->"] = decisions_list
