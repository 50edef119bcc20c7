"""The benchmarks as a suite: ``python -m benchmarks`` knows every script of the folder, and a run
writes its figures as JSON in the shared format (``_common.Run``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def _dispatcher():  # type: ignore[no-untyped-def]
    import importlib

    return importlib.import_module("benchmarks.__main__")


def test_every_module_of_the_folder_is_a_listed_benchmark_or_named_support() -> None:
    """A script added to benchmarks/ without a line in the dispatcher (and its ``--quick``
    arguments) fails here, as does a name listed without its script."""
    dispatcher = _dispatcher()
    modules = {p.stem for p in BENCHMARKS.glob("*.py")}
    assert modules - set(dispatcher.SUPPORT) == set(dispatcher.QUICK)
    assert set(dispatcher.SUPPORT) <= modules
    commands = {p.stem for p in (BENCHMARKS / "management" / "commands").glob("*.py")} - {"__init__"}
    assert commands == set(dispatcher.COMMANDS)


def test_the_listing_has_one_line_per_benchmark() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    dispatcher = _dispatcher()
    lines = [line.split() for line in out.stdout.splitlines() if line.startswith("  ")]
    assert [words[0] for words in lines] == sorted([*dispatcher.QUICK, *dispatcher.COMMANDS])
    assert all(len(words) > 1 for words in lines)  # a summary on each


def test_an_unknown_benchmark_is_refused_with_the_listing() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks", "no_such_benchmark"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "no benchmark 'no_such_benchmark'" in out.stderr and "cel_cost" in out.stderr


def test_a_quick_run_writes_its_figures_as_json(tmp_path: Path) -> None:
    """``cel_cost`` (no services) through the dispatcher with its tiny arguments: the record names
    the benchmark, the command, the commit checked out, the machine, the load before and after, and
    holds the figures the run printed as numbers."""
    target = tmp_path / "cel_cost.json"
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks", "cel_cost", "--quick", f"--json={target}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    assert f"figures written to {target}" in out.stdout
    record = json.loads(target.read_text())
    assert set(record) == {
        "benchmark",
        "command",
        "commit",
        "machine",
        "load_before",
        "load_after",
        "started_at",
        "finished_at",
        "exit_status",
        "figures",
        "output",
    }
    assert record["benchmark"] == "cel_cost"
    assert record["exit_status"] == 0
    assert record["command"] == ["python", "-m", "benchmarks", "cel_cost", *_dispatcher().QUICK["cel_cost"]]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode == 0:
        assert record["commit"]["sha"] == head.stdout.strip()
    machine = record["machine"]
    assert machine["cpus"] == os.cpu_count() and machine["ram_bytes"] > 0 and machine["model"]
    assert len(record["load_before"]) == len(record["load_after"]) == 3
    figures = record["figures"]
    assert figures["repeat"] == 1
    [expression] = figures["expressions"].values()
    [skill] = figures["skills"].values()
    assert 0 < expression["check_median_ms"] <= expression["check_max_ms"]
    assert skill["conditions"] > 0 and skill["compile_median_ms"] > 0
    assert any(line.startswith("worst: check") for line in record["output"])


def test_the_committed_results_are_in_the_shared_format() -> None:
    """What the documentation renders: every file of benchmarks/results/ is a run record."""
    files = sorted((BENCHMARKS / "results").glob("*.json"))
    assert files
    for path in files:
        record = json.loads(path.read_text())
        assert record["benchmark"] == path.stem
        assert {"command", "commit", "machine", "load_before", "load_after", "figures"} <= set(record)
