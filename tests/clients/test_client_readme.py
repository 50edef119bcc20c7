"""The Python client as a newcomer installs and uses it: the README's install command run in a fresh
virtual environment on an unpacked source archive of the client, then the README's examples (as
written there, the port of the live server put in) run by that environment's Python against a live
Engram.

The environment sees the shared environment's packages (a ``.pth`` line, as
``--system-site-packages`` would): downloading langgraph and its dependencies takes minutes here,
so pip fetches only the build backend. That the ``langgraph`` extra installs what the examples
import is checked on the installed metadata: every distribution they import is a requirement.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tenants.models import Tenant
from tests.factories import BASE_DIR, asgi_server, make_caller, requires_model

pytestmark = [requires_model, pytest.mark.timeout(900)]

CLIENT_README = BASE_DIR / "clients" / "python" / "README.md"
README_URL = "http://127.0.0.1:8000"
DISTRIBUTION = "engram-memory-client"


def blocks(markdown: Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", markdown.read_text(), re.S)


def main_readme_example() -> str:
    """The LangGraph guide's example (``tests/clients/test_langgraph_saver.py`` runs it
    twice in the shared environment)."""
    (example,) = re.findall(
        r"<!-- langgraph-example -->\s*```py\n(.*?)```",
        (BASE_DIR / "docs" / "guides" / "agents" / "langgraph.md").read_text(),
        re.S,
    )
    return example


def install_command() -> list[str]:
    """The README's command that installs the client with the ``langgraph`` extra."""
    lines = [
        line.split("#")[0].strip() for block in blocks(CLIENT_README, "sh") for line in block.splitlines()
    ]
    (command,) = [line for line in lines if line.startswith("pip install") and "[langgraph]" in line]
    return shlex.split(command)


def source_archive(folder: Path) -> Path:
    """An unpacked source archive: the client's folder as a tarball holds it (no build output)."""
    archive = folder / "engram.tar.gz"
    skip = re.compile(r"(^|/)(build|__pycache__|[^/]*\.egg-info)(/|$)")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(
            BASE_DIR / "clients" / "python",
            arcname="engram/clients/python",
            filter=lambda member: None if skip.search(member.name) else member,
        )
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    return folder / "engram"


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the client installed by the README's command."""
    folder = tmp_path_factory.mktemp("client-venv")
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "shared-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip, install, *arguments = install_command()
    assert (pip, install) == ("pip", "install")
    # the shared environment's pip acting on the new environment (``--python``): it has none
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", *arguments],
        cwd=source_archive(folder),
        env=clean_environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return python


@pytest.fixture
def base_url(scratch_tenant: Tenant) -> Iterator[str]:
    with asgi_server() as port:
        yield f"http://127.0.0.1:{port}"


def clean_environment() -> dict[str, str]:
    """This process's environment without ``PYTHONPATH`` (a newcomer's shell has none)."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}


def run(python: Path, source: str, tmp_path: Path, env: dict[str, str], *args: str) -> str:
    script = tmp_path / f"example_{uuid.uuid4().hex[:8]}.py"
    script.write_text(source)
    done = subprocess.run(
        [python, str(script), *args],
        cwd=tmp_path,
        env={**clean_environment(), **env},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_client_is_installed_into_the_new_environment(venv_python: Path, tmp_path: Path) -> None:
    where = run(venv_python, "import engram_client\nprint(engram_client.__file__)\n", tmp_path, {})
    assert where.strip().startswith(str(venv_python.parent.parent)), where


def test_the_readme_examples_run_as_written(
    venv_python: Path, scratch_tenant: Tenant, base_url: str, tmp_path: Path
) -> None:
    caller = make_caller(scratch_tenant, "readme-agent")
    examples = blocks(CLIENT_README, "python")
    assert len(examples) == 2, "the client's README has its client and LangGraph examples"
    outputs = []
    for example in examples:
        assert README_URL in example
        outputs.append(
            run(venv_python, example.replace(README_URL, base_url), tmp_path, {"ENGRAM_API_KEY": caller.key})
        )
    client, langgraph = outputs
    assert client.splitlines()[0] == "Alice moved to Lisbon"
    assert langgraph.splitlines() == [
        "{'text': 'vegetarian'}",
        "{'question': 'What do I eat?', 'answer': 'vegetarian'}",
    ]


def test_the_main_readmes_langgraph_example_runs_in_the_new_environment(
    venv_python: Path, scratch_tenant: Tenant, base_url: str, tmp_path: Path
) -> None:
    caller = make_caller(scratch_tenant, "readme-graph")
    example = main_readme_example()
    env = {"ENGRAM_URL": base_url, "ENGRAM_API_KEY": caller.key}
    out = run(venv_python, example, tmp_path, env, f"thread-{uuid.uuid4().hex[:8]}")
    assert out.splitlines()[-1] == "{'steps': ['plan', 'work'], 'total': 20}"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def owner(module: str) -> str:
    """The distribution whose files hold ``module`` (``langgraph.store.base``: langgraph-checkpoint)."""
    path = module.replace(".", "/")
    for distribution in importlib.metadata.distributions():
        if {f"{path}/__init__.py", f"{path}.py"} & {str(f) for f in distribution.files or ()}:
            return canonical(distribution.metadata["Name"])
    raise AssertionError(f"no distribution holds {module}")


def test_the_langgraph_extra_requires_what_the_examples_import(venv_python: Path) -> None:
    site = next((venv_python.parent.parent / "lib").glob("python3*/site-packages"))
    (installed,) = [
        d
        for d in importlib.metadata.distributions(path=[str(site)])
        if canonical(d.metadata["Name"]) == DISTRIBUTION
    ]
    required = {
        canonical(re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0])
        for requirement in installed.requires or ()
        if "extra" not in requirement or 'extra == "langgraph"' in requirement
    }
    modules = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for source in [*blocks(CLIENT_README, "python"), main_readme_example()]
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    third_party = {
        module
        for module in modules
        if module and module.split(".")[0] not in {*sys.stdlib_module_names, "engram_client"}
    }
    assert third_party, "the examples import LangGraph"
    for module in third_party:
        assert owner(module) in required, f"{module} ({owner(module)}) is not a requirement of the extra"
