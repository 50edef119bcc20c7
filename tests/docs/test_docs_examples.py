"""Every runnable code block of the documentation site and of the README runs against a live server.

Sybil finds the blocks (its Markdown lexer and code-block parser): a block fenced as ``bash`` or
``python`` is runnable; one fenced as ``sh``, ``py``, ``text``, ``json`` or ``sql`` is shown only
(docs/reference/docs.md says so to writers). A page's runnable blocks run in order: its ``bash``
blocks share their variables and functions (each block runs in a fresh ``bash -euo pipefail`` that
first restores what the earlier ones defined), its ``python`` blocks one namespace. They name the
server as ``./engram up`` serves it, ``http://127.0.0.1:8000``, which is replaced by a live uvicorn's
address, in a folder whose ``var/dev/credentials`` holds a key the way ``./engram up`` writes it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sybil import Sybil
from sybil.parsers.markdown import CodeBlockParser

from agents.models import Scope
from tenants.models import Tenant
from tests.factories import BASE_DIR, asgi_server, make_caller, requires_model

pytestmark = [requires_model, pytest.mark.timeout(600)]

DOCS_URL = "http://127.0.0.1:8000"
STATE = ".docs-bash-state"
BASH_KEEPS = r"""
{ declare -f
  for name in $(compgen -v); do
    case " $ENGRAM_DOCS_BASE_VARS " in *" $name "*) ;; *) declare -p "$name" ;; esac
  done; } > "$ENGRAM_DOCS_STATE"
"""


def _server(example: Any) -> str:
    return str(example.namespace["engram_url"])


def run_bash(example: Any) -> str | None:
    """Run one ``bash`` block after restoring the page's earlier definitions; keep its own."""
    source = str(example.parsed).replace(DOCS_URL, _server(example))
    script = f'[ -f "$ENGRAM_DOCS_STATE" ] && source "$ENGRAM_DOCS_STATE"\n{source}\n{BASH_KEEPS}'
    env = example.namespace["bash_env"]
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=env["PWD"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        return f"exit {done.returncode}\n--- block:\n{source}\n--- stdout:\n{done.stdout}\n--- stderr:\n{done.stderr}"
    return None


def run_python(example: Any) -> str | None:
    """Run one ``python`` block in the page's namespace."""
    source = str(example.parsed).replace(DOCS_URL, _server(example))
    exec(compile(source, str(example.path), "exec"), example.namespace)
    return None


SYBIL = Sybil(parsers=[CodeBlockParser("bash", run_bash), CodeBlockParser("python", run_python)])


def pages() -> list[Path]:
    """The README and every page of the site that has a runnable block."""
    candidates = [BASE_DIR / "README.md", *sorted((BASE_DIR / "docs").rglob("*.md"))]
    return [page for page in candidates if list(SYBIL.parse(page))]


def _base_vars(env: dict[str, str]) -> str:
    done = subprocess.run(["bash", "-c", "compgen -v"], env=env, capture_output=True, text=True, check=True)
    return " ".join(done.stdout.split())


def test_the_guides_that_promise_runnable_blocks_have_them() -> None:
    runnable = {page.relative_to(BASE_DIR).as_posix() for page in pages()}
    expected = {
        "README.md",
        "docs/getting-started.md",
        "docs/guides/agents/rest.md",
        "docs/guides/agents/python-client.md",
        "docs/guides/agents/mcp.md",
        "docs/guides/agents/context.md",
        "docs/guides/agents/skills.md",
        "docs/guides/agents/langgraph.md",
        "docs/guides/agents/consolidation.md",
        "docs/guides/agents/updates.md",
        "docs/guides/agents/conversations.md",
        "docs/guides/agents/end-users.md",
    }
    assert expected <= runnable, expected - runnable


@pytest.mark.parametrize("page", pages(), ids=lambda page: page.relative_to(BASE_DIR).as_posix())
def test_the_runnable_blocks_run_against_a_live_server(
    page: Path, scratch_tenant: Tenant, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    caller = make_caller(scratch_tenant, "docs-agent", scopes=(Scope.READ, Scope.WRITE))
    credentials = tmp_path / "var" / "dev" / "credentials"
    credentials.parent.mkdir(parents=True)
    credentials.write_text(
        f"# the test's key, as ./engram up writes it\n"
        f"API key for docs-agent in tenant {scratch_tenant.schema_name} (read+write): {caller.key}\n"
    )
    with asgi_server() as port:
        url = f"http://127.0.0.1:{port}"
        monkeypatch.setenv("ENGRAM_URL", url)
        monkeypatch.setenv("ENGRAM_API_KEY", caller.key)
        monkeypatch.chdir(tmp_path)
        env = {**os.environ, "PWD": str(tmp_path), "ENGRAM_DOCS_STATE": str(tmp_path / STATE)}
        env["ENGRAM_DOCS_BASE_VARS"] = _base_vars(env) + " ENGRAM_DOCS_BASE_VARS"
        document = SYBIL.parse(page)
        document.namespace.update(engram_url=url, bash_env=env)
        examples = list(document)
        assert examples
        for example in examples:
            example.evaluate()
