"""The settings and commands reference is generated from the code (``docs/hooks/reference.py``):
every environment variable the settings read and every command must have a description, so a new
one cannot go undocumented."""

from __future__ import annotations

import importlib.util
import re
import sys
from types import ModuleType

from tests.factories import BASE_DIR


def reference() -> ModuleType:
    """The hook module, loaded from its file (docs/hooks is no package)."""
    if "docs_reference" in sys.modules:
        return sys.modules["docs_reference"]
    path = BASE_DIR / "docs" / "hooks" / "reference.py"
    spec = importlib.util.spec_from_file_location("docs_reference", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_reference"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_setting_has_a_description() -> None:
    settings = reference().settings()
    missing = [s.name for s in settings if not s.description]
    assert not missing, (
        f"describe these in a comment beside them or in docs/reference/settings.toml: {missing}"
    )


def test_the_reference_finds_every_setting_the_settings_modules_read() -> None:
    """A cross-check by another reading: every quoted upper-case name passed to ``env...(`` or
    ``env_secret(`` in the settings modules is in the reference."""
    names = {s.name for s in reference().settings()}
    source = "\n".join(path.read_text() for path in (BASE_DIR / "config" / "settings").glob("*.py"))
    read = set(re.findall(r"env(?:\.\w+|_secret)?\(\s*\"([A-Z][A-Z0-9_]+)\"", source))
    assert read and read <= names, read - names


def test_the_settings_described_by_file_exist() -> None:
    """An entry of settings.toml for a setting the code no longer reads is stale."""
    import tomllib

    described = set(tomllib.loads((BASE_DIR / "docs" / "reference" / "settings.toml").read_text()))
    assert described <= {s.name for s in reference().settings()}


def test_every_command_has_a_description() -> None:
    commands = reference().commands()
    usages = {c.usage for c in commands}
    assert {"./engram up", "./engram test", "./engram docs", "./engram manage verify_chain"} <= usages
    missing = [c.usage for c in commands if not c.help]
    assert not missing, f"give these a help text: {missing}"
