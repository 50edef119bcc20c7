"""What checking a skill condition costs at worst: the most expensive CEL expressions that fit in the
length limit (``cel.MAX_EXPRESSION_CHARS``, 2,000 characters), each through ``cel.check`` as the
skill compiler runs it (parse, type check and, for an expression that names no input, evaluation
within the step budget ``cel.EVALUATION_STEPS``).

One family of expressions per way to make evaluation costly, each built as large as the limit
allows: nested macros over list literals (the body runs once per element per level), a macro
variable used twice (``a + a`` doubles a list or a string per level; ``a == a`` and ``string(a)``
walk a value shared 2^n times), regular expressions with large programs or that fail to compile,
the exponential backtracking of cel-python's ``duration()`` check, errors combined by ``||`` or
folded by ``all()`` (cel-python quotes both operands in the next error), and the largest plain
expressions (no macro: each node evaluated once). For each: its length, the outcome (refused, or
the constant it evaluates to), the time of ``cel.check`` with the parse cache cleared (median and
worst of ``--repeat`` runs; parsing 2,000 characters alone takes up to ~100 ms) and the worst time
of the evaluation alone. Then whole skills: as many copies of
an expression as one skill may hold (``validation.MAX_STEPS``, ``validation.MAX_CONDITION_CHARS``),
compiled by ``validation.compile_skill`` (its conditions share ``cel.SKILL_EVALUATION_STEPS``). The
figures are printed and, with ``--json``, stored in ``benchmarks/results/cel_cost.json`` (kept with
the code). ``--first N`` measures the first N expressions and skills only.

No services needed::

    python -m benchmarks cel_cost --repeat 5 --json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _common import record  # noqa: E402

from memory.procedural import cel, validation  # noqa: E402  (the path above first)
from memory.procedural.cel import parsing  # noqa: E402

LIMIT = cel.MAX_EXPRESSION_CHARS
NAMES = [f"v{i}" for i in range(200)]


def largest(build: Callable[[int], str], start: int = 1) -> str:
    """``build(n)`` for the largest ``n`` whose expression fits in the limit."""
    n = start
    while len(build(n + 1)) <= LIMIT:
        n += 1
    return build(n)


def nested_all(levels: int, items: int) -> str:
    """``[1,...,items].all(v0, [1,...,items].all(v1, ... true))``: items ** levels evaluations."""
    values = "[" + ",".join(str(i) for i in range(1, items + 1)) + "]"
    text = "true"
    for level in reversed(range(levels)):
        text = f"{values}.all({NAMES[level]},{text})"
    return text


def doubling(levels: int, seed: str, body: Callable[[str], str]) -> str:
    """``[seed].map(v0, [v0 + v0].map(v1, ... body(vN)))``: a value twice as large per level."""
    text = body(NAMES[levels])
    for level in reversed(range(1, levels + 1)):
        prev = NAMES[level - 1]
        text = f"[{prev}+{prev}].all({NAMES[level]},{text})"
    return f"[{seed}].all({NAMES[0]},{text})"


def shared(levels: int, body: Callable[[str], str]) -> str:
    """``[[1,1]].all(v0, [[v0,v0]].all(v1, ... body(vN)))``: a list holding the one before twice, so
    walking the last one visits 2^levels leaves."""
    text = body(NAMES[levels - 1])
    for level in reversed(range(levels)):
        prev = "1" if level == 0 else NAMES[level - 1]
        text = f"[[{prev},{prev}]].all({NAMES[level]},{text})"
    return text


def repeated(term: str, joiner: str) -> Callable[[int], str]:
    return lambda n: joiner.join([term] * n)


FAMILIES: dict[str, Callable[[], str]] = {
    # the expression of the report: five levels of ten, 159 characters, 10^5 evaluations
    "nested .all(), 5 levels of 10": lambda: nested_all(5, 10),
    "nested .all(), 3 levels, widest": lambda: largest(lambda n: nested_all(3, n)),
    "nested .all(), 8 levels, widest": lambda: largest(lambda n: nested_all(8, n)),
    "one .all() over the longest list": lambda: largest(lambda n: nested_all(1, n)),
    "doubling a list (a + a)": lambda: largest(lambda n: doubling(n, "[1]", lambda v: f"size({v}) > 0")),
    "doubling a string (a + a)": lambda: largest(lambda n: doubling(n, "'ab'", lambda v: f"size({v}) > 0")),
    "comparing a shared value (a == a)": lambda: largest(lambda n: shared(n, lambda v: f"{v} == {v}")),
    "converting a shared value (string(a))": lambda: largest(
        lambda n: shared(n, lambda v: f"string(dyn({v})) != ''")
    ),
    "matches() with a 1,000-state program": lambda: largest(
        repeated("'" + "a" * 200 + "'.matches('[a-z]{1000}x')", " || ")
    ),
    "matches() that fails to compile": lambda: largest(repeated("'b'.matches('\\\\pL{1000}')", " || ")),
    "duration() on a string it backtracks on": lambda: largest(
        lambda n: f"duration('{'a' * n}!') > duration('1s')"
    ),
    "errors or-ed together (1/0 > 0 || ...)": lambda: largest(repeated("1/0>0", "||")),
    "errors folded by .all() over the longest list": lambda: largest(
        lambda n: "[" + ",".join(["0"] * n) + "].all(v0, 1/v0 > 0)"
    ),
    "plain: the longest list literal": lambda: largest(lambda n: "[" + ",".join(["1"] * n) + "] == []"),
    "plain: the longest && chain": lambda: largest(repeated("true", "&&")),
    "plain: the longest string concatenation": lambda: largest(repeated("'aaaaaaaa'", "+"), 2) + " == ''",
    "plain: the deepest parentheses": lambda: largest(lambda n: "(" * n + "true" + ")" * n),
}


def measure(text: str, repeat: int) -> dict[str, Any]:
    """``cel.check(text)`` ``repeat`` times with the parse cache cleared (its outcome and times), and
    ``cel.evaluate`` alone on the parsed tree (the part the step budget bounds), in ms."""
    checks, evaluations, outcome = [], [], ""
    for _ in range(repeat):
        parsing._parse.cache_clear()
        started = time.perf_counter()
        try:
            result = cel.check(text, {})
            outcome = f"constant {result.constant!r}" if result.constant is not None else "not a constant"
        except cel.CelCostError:
            outcome = "refused: over the step budget"
        except cel.CelCheckError as exc:
            outcome = f"refused: {exc}"
        checks.append((time.perf_counter() - started) * 1000)
        try:
            tree = cel.parse(text)
        except cel.CelCheckError:
            continue
        started = time.perf_counter()
        try:
            cel.evaluate(tree, {})
        except Exception:  # over the budget, an error at run time, or nesting beyond Python's stack
            pass
        evaluations.append((time.perf_counter() - started) * 1000)
    return {
        "chars": len(text),
        "outcome": outcome[:80],
        "check_median_ms": round(statistics.median(checks), 1),
        "check_max_ms": round(max(checks), 1),
        "evaluate_max_ms": round(max(evaluations), 1) if evaluations else None,
    }


NOOP = validation.ToolContract(
    "noop", 1, {"type": "object", "properties": {}, "required": []}, {"type": "object", "properties": {}}
)


def skill(conditions: list[str]) -> list[dict[str, Any]]:
    return [{"id": f"s{i}", "tool": "noop", "when": text} for i, text in enumerate(conditions)]


def fill(condition: str) -> list[str]:
    """As many copies of ``condition`` as a skill may hold (steps, and characters of conditions)."""
    return [condition] * min(validation.MAX_STEPS, validation.MAX_CONDITION_CHARS // len(condition))


# whole skills: the conditions of one skill share a budget (cel.SKILL_EVALUATION_STEPS) and a length
SKILLS: dict[str, Callable[[], list[str]]] = {
    "skill: 10 of the longest list literal": lambda: fill(FAMILIES["plain: the longest list literal"]()),
    "skill: 10 of the widest 3-level .all()": lambda: fill(FAMILIES["nested .all(), 3 levels, widest"]()),
    "skill: 125 of the 5-level .all()": lambda: fill(FAMILIES["nested .all(), 5 levels of 10"]()),
    "skill: 200 of a .all() under its own budget": lambda: fill(
        "[" + ",".join(str(i) for i in range(1, 41)) + "].all(x, x > 0)"
    ),
}


def measure_skill(conditions: list[str], repeat: int) -> dict[str, Any]:
    """``validation.compile_skill`` over one step per condition, parse cache cleared, in ms."""
    times, refused = [], 0
    for _ in range(repeat):
        parsing._parse.cache_clear()
        started = time.perf_counter()
        compiled = validation.compile_skill(
            steps=skill(conditions), input_schema={"type": "object", "properties": {}}, tools={"noop": NOOP}
        )
        times.append((time.perf_counter() - started) * 1000)
        refused = sum(
            1 for p in compiled.problems if p.path.endswith(".when")
        )  # over budget, or always false
    return {
        "conditions": len(conditions),
        "chars": sum(map(len, conditions)),
        "outcome": f"{refused} with a problem at their when",
        "compile_median_ms": round(statistics.median(times), 1),
        "compile_max_ms": round(max(times), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5, help="runs per expression (default 5)")
    parser.add_argument("--first", type=int, help="measure the first N expressions and skills only")
    args = parser.parse_args()
    cel.check("1 > 2", {})  # the parser is built on first use: not part of any figure
    families = list(FAMILIES.items())[: args.first]
    rows = {name: measure(build(), args.repeat) for name, build in families}
    width = max(map(len, rows))
    print(f"{'expression':<{width}}  chars  check p50  check max  evaluate max  outcome (ms)")
    for name, row in rows.items():
        print(
            f"{name:<{width}}  {row['chars']:>5}  {row['check_median_ms']:>9}  {row['check_max_ms']:>9}  "
            f"{row['evaluate_max_ms'] if row['evaluate_max_ms'] is not None else '-':>12}  {row['outcome']}"
        )
    skills = {name: measure_skill(build(), args.repeat) for name, build in list(SKILLS.items())[: args.first]}
    print(f"\n{'whole skill':<{width}}  conditions  chars  compile p50  compile max  outcome (ms)")
    for name, row in skills.items():
        print(
            f"{name:<{width}}  {row['conditions']:>10}  {row['chars']:>5}  {row['compile_median_ms']:>11}  "
            f"{row['compile_max_ms']:>11}  {row['outcome']}"
        )
    print(
        f"worst: check {max(r['check_max_ms'] for r in rows.values())} ms, of which evaluation at most "
        f"{max(r['evaluate_max_ms'] or 0 for r in rows.values())} ms "
        f"(step budget: tree size + {cel.EVALUATION_STEPS}); a whole skill's compile "
        f"{max(r['compile_max_ms'] for r in skills.values())} ms; load average {os.getloadavg()[0]:.1f}"
    )
    limits = {
        "evaluation_steps": cel.EVALUATION_STEPS,
        "skill_evaluation_steps": cel.SKILL_EVALUATION_STEPS,
        "max_condition_chars": validation.MAX_CONDITION_CHARS,
    }
    record(**limits, repeat=args.repeat, expressions=rows, skills=skills)


if __name__ == "__main__":
    main()
