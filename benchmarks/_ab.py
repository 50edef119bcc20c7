"""The A/B harness: the code of two checkouts measured side by side in one run, rounds interleaved.

On a shared machine the load moves between two runs more than most changes do. So a before / after
runs one worker process per side: ``base`` with another checkout's code (``--base``, e.g.
``/work/main`` or a ``git archive`` of it unpacked next to this one) and ``new`` with this
checkout's, both using this checkout's virtualenv and benchmark scripts. The driver sends each
side the same request per round, the order of the sides alternating round by round, and gathers
the answers and the load average.

A benchmark uses it in two halves:

- the driver calls ``compare(script=__file__, base=..., rounds=..., warmup=..., request=...)`` and
  gets each side's answers (or starts ``Side``s itself to interleave them with other systems);
- the same script, started as ``script --ab-worker <root> [args...]``, calls ``serve(root, setup,
  probe)``: ``setup(stack)`` prepares the measurement (what must end with the worker, a server or a
  scratch tenant, entered on ``stack``) and returns the handler that turns one request into one
  answer (both JSON).

``entry(worker=..., driver=...)`` is the script's ``__main__``: the worker with ``(root, *args)``
when started as one, else the driver.

The worker's protocol is one JSON line per request and per answer on its stdin and stdout; its
first line is ``ready <file of the probe module>``. Anything the set-up prints goes to stderr. A
worker stops with status 2 when any module of the project's packages came from outside its checkout
(``loaded_elsewhere``), checked after the set-up and after every round.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import ROOT, commit, record

WORKER_FLAG = "--ab-worker"
# the project's top-level packages (pyproject's [tool.setuptools] packages): a worker must load
# every one of them from its own checkout
PROJECT_PACKAGES = ("agents", "api", "compliance", "config", "core", "devstack", "memory", "tenants")


def loaded_elsewhere(root: str) -> list[str]:
    """The modules of the project's packages loaded in this process from outside ``root`` (the
    editable install's checkout, when ``root`` is another), as ``name: file``."""
    prefix = os.path.join(os.path.realpath(root), "")
    wrong = []
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] not in PROJECT_PACKAGES:
            continue
        where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", [])), None)
        if where is not None and not os.path.realpath(where).startswith(prefix):
            wrong.append(f"{name}: {where}")
    return wrong


@dataclass
class Side:
    """One worker process running ``script`` with the code of checkout ``root``."""

    name: str
    root: str
    proc: subprocess.Popen[str]
    code: str

    @classmethod
    def start(cls, name: str, root: str | Path, script: str, args: Sequence[str] = ()) -> Side:
        """Start ``python script --ab-worker <root> args...`` and wait for its ``ready`` line.

        The checkout's code comes first on the worker's path from its first statement, and the
        worker runs in the checkout's folder: Celery's Django fixup (run by ``django.setup()``
        through the project's Celery app) puts the working directory first on ``sys.path``.
        Raises ``SystemExit`` if the worker does not start or loaded its probe from outside
        ``root``."""
        root = os.path.realpath(root)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
        proc = subprocess.Popen(
            [sys.executable, os.path.abspath(script), WORKER_FLAG, root, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=root,
        )
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line.startswith("ready "):
            raise SystemExit(f"{name}: the worker did not start (it said {line!r}; its stderr above)")
        code = line.removeprefix("ready ")
        if not os.path.realpath(code).startswith(os.path.join(root, "")):
            raise SystemExit(f"{name}: the worker loaded {code}, not the code of {root}")
        print(f"  {name}: {code}", flush=True)
        return cls(name, root, proc, code)

    def ask(self, request: Any) -> Any:
        """Send one request (JSON-able) and return the worker's answer. Raises ``SystemExit`` when
        the worker answers with anything but JSON (it failed; its stderr says why)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        try:
            return json.loads(answer)
        except json.JSONDecodeError:
            raise SystemExit(
                f"{self.name}: the worker failed (it said {answer.strip()!r}; its stderr above)"
            ) from None

    def close(self) -> None:
        """End the worker (its stdin closes) and wait for it."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(60)


def worker_root(argv: Sequence[str] | None = None) -> tuple[str, list[str]] | None:
    """``(root, args)`` when this process was started as a worker (``script --ab-worker <root>
    args...``), else None."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] != [WORKER_FLAG]:
        return None
    return argv[1], list(argv[2:])


def arguments(doc: str | None) -> argparse.ArgumentParser:
    """An A/B benchmark's command line: described by the first paragraph of ``doc``, with
    ``--base``, the other checkout."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the other checkout (its code, this .venv)")
    return parser


def entry(*, worker: Callable[..., None], driver: Callable[[], None]) -> None:
    """Run ``worker(root, *args)`` when this process was started as a worker, else ``driver()``."""
    found = worker_root()
    if found:
        root, args = found
        worker(root, *args)
    else:
        driver()


def serve(root: str, setup: Callable[[contextlib.ExitStack[Any]], Callable[[Any], Any]], probe: str) -> None:
    """The worker's side: Django set up with ``root``'s code first, ``setup(stack)`` run (it returns
    the handler; what it enters on ``stack`` ends with the worker), then one answer per request
    line until stdin closes. ``probe`` names a module whose file the ``ready`` line shows (the
    code under test). Exits with status 2 when a module of the project's packages came from
    outside ``root``."""
    import importlib

    sys.stdout.flush()
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # fd 1 (and so sys.stdout) is stderr from here: the protocol has its own
    sys.path.insert(0, root)
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))  # so django_setup does not put this checkout before ``root``
    from _common import django_setup

    django_setup()

    def check() -> None:
        wrong = loaded_elsewhere(root)
        if wrong:
            print(f"modules not from {root}:\n  " + "\n  ".join(sorted(wrong)), file=sys.stderr)
            protocol.write("wrong-code\n")
            protocol.flush()
            sys.exit(2)

    with contextlib.ExitStack() as stack:
        handler = setup(stack)
        check()
        print(f"ready {importlib.import_module(probe).__file__}", file=protocol, flush=True)
        for line in sys.stdin:
            answer = handler(json.loads(line))
            check()  # what the round imported too (untimed)
            print(json.dumps(answer), file=protocol, flush=True)


@dataclass
class Comparison:
    """What ``compare`` gathered: each side's answers to the measured rounds (in round order), the
    1-minute load average after each measured round, and each side's checkout ``{root, code,
    commit}``."""

    answers: dict[str, list[Any]]
    loads: list[float]
    sides: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def load_range(self) -> str:
        return f"{min(self.loads):.1f}-{max(self.loads):.1f}" if self.loads else "-"

    def record(self, **figures: Any) -> None:
        """``_common.record`` of ``figures`` with the sides, the measured rounds and their loads."""
        record(sides=self.sides, rounds=len(self.loads), loads=self.loads, **figures)


def compare(
    *,
    script: str,
    base: str | Path,
    rounds: int,
    warmup: int,
    request: Callable[[int], Any],
    args: Sequence[str] = (),
) -> Comparison:
    """Run ``script``'s worker for ``base`` and for this checkout (started one after the other:
    the first may write a cache the second reads), then ``warmup + rounds`` rounds, round ``r``
    sending ``request(r)`` to both sides (``base`` first on even rounds, ``new`` first on odd
    ones). The warm-up rounds' answers are dropped."""
    sides: list[Side] = []
    try:
        for name, root in (("base", base), ("new", ROOT)):
            sides.append(Side.start(name, root, script, args))
        result = Comparison(
            {s.name: [] for s in sides},
            [],
            {s.name: {"root": s.root, "code": s.code, "commit": commit(s.root)} for s in sides},
        )
        for r in range(warmup + rounds):
            req = request(r)
            for side in sides if r % 2 == 0 else sides[::-1]:
                answer = side.ask(req)
                if r >= warmup:
                    result.answers[side.name].append(answer)
            if r >= warmup:
                result.loads.append(os.getloadavg()[0])
    finally:
        for side in sides:
            side.close()
    return result
