"""``python -m benchmarks NAME [args...]``: run one benchmark; with no NAME, list them.

Every benchmark is a script of this folder, run as ``python benchmarks/NAME.py`` would run it (its
siblings importable by their names, ``NAME.py`` as ``__main__``). Besides the benchmark's own
arguments the dispatcher takes:

- ``--quick``: the benchmark's tiny arguments (``QUICK``; the ``{root}`` of an A/B benchmark's
  ``--base`` is this checkout, an A/A run): checks that it starts and finishes, not a figure;
- ``--json`` or ``--json=PATH``: write the run's record (``_common.Run``: command, commit, machine,
  load before and after, the figures the benchmark recorded and the lines it printed) to ``PATH``,
  by default ``benchmarks/results/NAME.json``.

``locomo_ingest``, ``locomo_eval``, ``madial_eval`` and ``recall_eval`` are management commands of the ``benchmarks`` app, run
through Django's command line.
"""

from __future__ import annotations

import ast
import io
import runpy
import sys
from pathlib import Path
from typing import Any, TextIO

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# benchmark -> the arguments of ``--quick`` (tiny sizes; A/B against this checkout)
QUICK: dict[str, list[str]] = {
    "api_docs": "--runs 2 --requests 5".split(),
    "audit_trail": "--events 2000 --batch 500 --agents 2 --session-events 10 --requests 10".split(),
    "blackboard": "--ops 200 --http-ops 40 --clients 2".split(),
    "cel_cost": "--repeat 1 --first 1".split(),
    "checkpoint_restore": "--sessions 50 --steps 2 --requests 50 --warmup 10".split(),
    "consolidation": "summarize --events 300".split(),
    "console_pages": (
        "--tenant bench_console_quick --contradictions 60 --events 100 --waiting 3 --requests 5 --warmup 1 --drop"
    ).split(),
    "conversation": "throughput --rounds 2 --batch 4 --warmup 0".split(),
    "context_assembly": "--memories 300 --queries 10 --jobs 1".split(),
    "context_refresh": "--sizes 50 --rounds 1".split(),
    "event_append": "--batches 20 --batch 10 --warmup 2 --server uvicorn --workers 1".split(),
    "graph_ab": "--base {root} --tenant bench_kg_quick --samples 10 --hubs 2 --rounds 2".split(),
    "knowledge_batch": "--facts 2000 --batch 100 --rounds 2 --samples 10 --tenant bench_kgb_quick".split(),
    "knowledge_graph": (
        "--facts 1000 --tenant bench_kg_quick --http-facts 0 --samples 10 --pairs 3 --hubs 2 --depth3-samples 2 "
        "--no-path-pairs 1"
    ).split(),
    "langgraph_saver": "--rounds 10".split(),
    "load": "--agents 2 --tenants 2 --steps 2 --step-seconds 5 --seed 2 --web 1".split(),
    "lifecycle": "--others 2000 --subject-rows 100 --memories 2000".split(),
    "mcp_overhead": "--calls 10".split(),
    "memory_writes": "--batches 1 --batch 20 --singles 5".split(),
    "migration_context": "--size 500 --base {root} --cache 200 --bound 300".split(),
    "peers": "--checkpoints-only --rounds 1".split(),
    "search_ab": "--base {root} --size 200 --rounds 2 --queries 5".split(),
    "search_http_ab": "--base {root} --tenant bench_search_200 --queries 10 --rounds 2".split(),
    "search_latency": "--sizes 200 --queries 10 --warmup 2 --jobs 1 --workers 1 --server uvicorn".split(),
    "skill_match": "--skills 50 --queries 10".split(),
    "tenant_backup": "--memories 500 --events 50".split(),
    "tenant_move": "--memories 500 --events 50".split(),
    "tenant_roles": "--statements 200 --blocks 2 --requests 20 --tenants 2".split(),
    "updates": "--limit 3".split(),
    "writes_ab": "facts --base {root} --rounds 2 --warmup 0".split(),
}
# management commands of the benchmarks app (benchmarks/management/commands)
COMMANDS = {
    "locomo_ingest": "Ingest a LoCoMo file into a tenant (one memory per turn).",
    "locomo_eval": "Recall quality on a LoCoMo file: hit@k of the evidence turns per category.",
    "madial_eval": "Recall quality on MADial-Bench: the right past memory for a whole dialogue.",
    "recall_eval": "Recall quality on LoCoMo and MADial together, written as one JSON document.",
}
# modules of this folder that are not benchmarks: the harness, the corpus, the app, the data sets' parsing
SUPPORT = ("__init__", "__main__", "_ab", "_common", "apps", "corpus", "locomo", "madial")


def summary(name: str) -> str:
    """The first sentence of benchmark ``name``'s docstring, read without importing it (a
    benchmark may parse its arguments or set up Django on import)."""
    if name in COMMANDS:
        return COMMANDS[name]
    doc = ast.get_docstring(ast.parse((HERE / f"{name}.py").read_text())) or ""
    text = " ".join(doc.split("\n\n")[0].split()).replace("``", "")
    sentence = text.split(". ")[0].rstrip(".")
    head = sentence.split(": ")[0]
    line = head if len(head) >= 20 else sentence
    return line if len(line) <= 100 else line[:97] + "..."


def listing() -> str:
    """One line per benchmark and command: its name and ``summary``."""
    names = sorted([*QUICK, *COMMANDS])
    width = max(map(len, names))
    lines = [f"  {name:<{width}}  {summary(name)}" for name in names]
    return "usage: python -m benchmarks NAME [--quick] [--json[=PATH]] [args...]\n\n" + "\n".join(lines)


class _Tee(io.TextIOBase):
    """Writes to ``stream`` and keeps a copy of the text (the lines the run printed)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.copy = io.StringIO()

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def fileno(self) -> int:
        return self.stream.fileno()


def _options(args: list[str]) -> tuple[list[str], bool, str | None]:
    """``args`` without the dispatcher's own options, whether ``--json`` was given, and its path."""
    rest, wanted, path = [], False, None
    for arg in args:
        if arg == "--json":
            wanted = True
        elif arg.startswith("--json="):
            wanted, path = True, arg.removeprefix("--json=")
        else:
            rest.append(arg)
    return rest, wanted, path


def run(name: str, args: list[str]) -> int:
    """Run benchmark ``name`` with ``args`` (``--quick`` and ``--json`` handled here); its exit
    status. The JSON record is written when the benchmark ends with status 0, or with another status
    after recording its figures (a target it checks was missed: the record says so)."""
    args, wanted, path = _options(args)
    if "--quick" in args and name in QUICK:
        args = [a for a in args if a != "--quick"]
        args = [a.replace("{root}", str(ROOT)) for a in QUICK[name]] + args
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    from _common import Run, recorded

    record = Run(benchmark=name, command=["python", "-m", "benchmarks", name, *args])
    tee = _Tee(sys.stdout) if wanted else None
    status: Any = 0
    try:
        if tee is not None:
            sys.stdout = tee
        if name in COMMANDS:
            from _common import django_setup
            from django.core.management import execute_from_command_line

            django_setup()
            execute_from_command_line(["manage.py", name, *args])
        else:
            sys.argv = [str(HERE / f"{name}.py"), *args]
            runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as exc:
        status = exc.code
    finally:
        if tee is not None:
            sys.stdout = tee.stream
    code = status if isinstance(status, int) else (0 if status is None else 1)
    if isinstance(status, str):
        print(status, file=sys.stderr)
    if wanted and (code == 0 or recorded()):
        assert tee is not None
        written = record.write(path, output=tee.copy.getvalue().splitlines(), exit_status=code)
        print(f"figures written to {written}")
    return code


def main(argv: list[str] | None = None) -> int:
    """The command line: list the benchmarks, or run one."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(listing())
        return 0
    name = argv[0]
    if name not in QUICK and name not in COMMANDS:
        print(f"no benchmark {name!r}\n\n{listing()}", file=sys.stderr)
        return 2
    return run(name, argv[1:])


if __name__ == "__main__":
    sys.exit(main())
