"""The suite's own rules: a test gives up only through ``tests.factories.unavailable``, which skips
with its reason here and fails with the same reason under CI (``CI=true``), where every test must run."""

from __future__ import annotations

import re

import pytest

from tests.factories import BASE_DIR, unavailable

#: ways a test could skip, or test for CI, on its own
GIVING_UP = re.compile(r"pytest\.skip\(|pytest\.mark\.skip|\bskipif\b|importorskip|\.xfail\b|[\"']CI[\"']")


def test_no_test_skips_but_through_unavailable() -> None:
    own = BASE_DIR / "tests" / "factories.py"
    found = [
        f"{path.relative_to(BASE_DIR)}:{number}: {line.strip()}"
        for path in sorted((BASE_DIR / "tests").rglob("*.py"))
        if path not in (own, BASE_DIR / "tests" / "test_suite.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if GIVING_UP.search(line)
    ]
    assert not found, "skip (or fail under CI) with tests.factories.unavailable:\n" + "\n".join(found)


@pytest.mark.parametrize(("ci", "outcome"), [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_unavailable_skips_here_and_fails_under_ci(
    monkeypatch: pytest.MonkeyPatch, ci: str, outcome: type[BaseException]
) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match=r"^the thing is missing$"):
        unavailable("the thing is missing")


def test_the_owner_teammate_outsider_trio_is_defined_once() -> None:
    """``alice`` (owner), ``bob`` (teammate) and ``mallory`` (outsider) come from tests/conftest.py;
    a module that needs them in committed tenants overrides ``trio_tenants``, not the trio."""
    trio = re.compile(r"^def (alice|bob|mallory)\(", re.M)
    copies = [
        f"{path.relative_to(BASE_DIR)}: {match[1]}"
        for path in sorted((BASE_DIR / "tests").rglob("*.py"))
        if path != BASE_DIR / "tests" / "conftest.py"
        for match in trio.finditer(path.read_text())
    ]
    assert not copies, "the trio is defined in tests/conftest.py only:\n" + "\n".join(copies)
