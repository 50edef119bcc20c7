"""Evaluating CEL with cel-python within a cost budget (the one way Engram evaluates CEL)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import lark
import re2
from celpy import celtypes
from celpy.evaluation import CELEvalError, Evaluator, base_functions

from .parsing import CelCheckError, environment, tree_size

# What evaluating an expression may cost beyond one visit of each node of its tree (see ``evaluate``):
# about 10 ms, while ``[1, 2, 3].all(x, x > 0)`` costs about 100; and what the conditions of one
# skill may cost so in all (a ``Budget`` they share).
EVALUATION_STEPS = 1000
SKILL_EVALUATION_STEPS = 10 * EVALUATION_STEPS


class CelCostError(CelCheckError):
    """Evaluating the expression would cost more than its budget (``evaluate``)."""


class _OverBudget(Exception):
    pass


class Budget:
    """Steps that several evaluations share (``evaluate``'s ``pool``): ``left`` goes down by what
    each spends beyond its tree's size."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.left = steps


class _Budget:
    """Steps left; ``spend`` raises ``_OverBudget`` once they run out."""

    __slots__ = ("left",)

    def __init__(self, steps: int) -> None:
        self.left = steps

    def spend(self, steps: int) -> None:
        self.left -= steps
        if self.left < 0:
            raise _OverBudget


def _size(value: Any) -> int:
    """What touching ``value`` costs: 1 for a scalar, the length of a string or bytes, and for a list
    or map 1 plus the sizes of its entries, counted as a tree (a value held twice counts twice: a
    comparison or a conversion walks it twice). The walk is memoised by identity, so it is linear in
    the distinct values and never costs more than what it reports."""
    if isinstance(value, str | bytes):
        return max(len(value), 1)
    if not isinstance(value, list | dict):
        return 1
    sizes: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, children_done = stack.pop()
        if id(item) in sizes:
            continue
        parts = [*item.keys(), *item.values()] if isinstance(item, dict) else item
        if children_done:
            sizes[id(item)] = 1 + sum(sizes[id(p)] if isinstance(p, list | dict) else _size(p) for p in parts)
            continue
        stack.append((item, True))
        stack.extend((p, False) for p in parts if isinstance(p, list | dict) and id(p) not in sizes)
    return sizes[id(value)]


def _metered(function: Callable[..., Any], budget: _Budget) -> Callable[..., Any]:
    """``function`` spending the sizes of its arguments and result beyond 1 each (a scalar is paid for
    by the node that made it)."""

    def call(*args: Any) -> Any:
        budget.spend(sum(_size(a) - 1 for a in args))
        result = function(*args)
        budget.spend(_size(result) - 1)
        return result

    return call


# cel-python checks a duration string with a backtracking regex that is exponential in the length of a
# string that fails it (``duration('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!')`` runs for minutes); RE2 checks the
# same pattern in linear time first, and on a string that passes it the backtracking regex never backs up.
_DURATION = re2.compile(r"[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+")


def _duration(value: Any) -> Any:
    if isinstance(value, str) and not _DURATION.fullmatch(value):
        raise ValueError(f"Invalid duration {value!r}")
    return celtypes.DurationType(value)


# cel-python's ``||`` and ``&&`` (and the ``all()`` and ``exists()`` macros, which fold with them) put
# the repr of both operands in the message of the error they return when neither is a bool, so each
# error or-ed with another holds the last one, quoted again: its size doubles per operand
# (``1/0 > 0 || 1/0 > 0 || ...`` reaches gigabytes in 300 characters). These keep the first error.
_NO_OVERLOAD = "no such overload"


def _error(x: Any, y: Any) -> CELEvalError:
    for value in (x, y):
        if isinstance(value, CELEvalError):
            return value
    return CELEvalError(_NO_OVERLOAD, TypeError, ())


def _and(x: Any, y: Any) -> Any:
    """CEL's ``&&``, commutative over errors: false if either is false, else an error if either is."""
    if (isinstance(x, celtypes.BoolType) and not x) or (isinstance(y, celtypes.BoolType) and not y):
        return celtypes.BoolType(False)
    if isinstance(x, celtypes.BoolType) and isinstance(y, celtypes.BoolType):
        return celtypes.BoolType(True)
    return _error(x, y)


def _or(x: Any, y: Any) -> Any:
    """CEL's ``||``, commutative over errors: true if either is true, else an error if either is."""
    if (isinstance(x, celtypes.BoolType) and x) or (isinstance(y, celtypes.BoolType) and y):
        return celtypes.BoolType(True)
    if isinstance(x, celtypes.BoolType) and isinstance(y, celtypes.BoolType):
        return celtypes.BoolType(False)
    return _error(x, y)


_REGEX_OPTIONS = re2.Options()
_REGEX_OPTIONS.max_mem = 64 * 1024  # a pattern whose program is bigger fails to compile, quickly
_REGEX_OPTIONS.log_errors = False
REGEX_COMPILE_STEPS = 100  # about 0.5 ms: compiling a pattern that fails at the memory limit


def _matcher(budget: _Budget) -> Callable[[Any, Any], Any]:
    """``matches`` (RE2, as cel-python's) with its cost spent: a compile, then the RE2 search's
    ``len(text) * program size`` cells (its worst case, the NFA), 500 cells a step."""

    def matches(text: Any, pattern: Any) -> Any:
        budget.spend(REGEX_COMPILE_STEPS)
        try:
            regex = re2.compile(pattern, _REGEX_OPTIONS)
        except re2.error as exc:
            raise ValueError(f"Invalid pattern: {exc}") from None
        budget.spend((len(text) + 1) * regex.programsize // 500)
        return celtypes.BoolType(regex.search(text) is not None)

    return matches


class _MeteredEvaluator(Evaluator):
    """cel-python's evaluator, spending one step per node it visits (a macro visits its body once per
    element); its macros' bodies are evaluated by evaluators sharing the budget."""

    def __init__(self, ast: lark.Tree, activation: Any, budget: _Budget) -> None:
        super().__init__(ast, activation)
        self.budget = budget

    def visit(self, tree: lark.Tree) -> Any:
        self.budget.spend(1)
        return super().visit(tree)

    def visit_children(self, tree: lark.Tree) -> list[Any]:
        self.budget.spend(len(tree.children))
        return super().visit_children(tree)

    def sub_evaluator(self, ast: lark.Tree) -> Evaluator:
        return _MeteredEvaluator(ast, self.activation, self.budget)

    def member_dot_arg(self, tree: lark.Tree) -> Any:
        """``all()`` and ``exists()`` folded with ``_and`` / ``_or`` (stopping at the first false /
        true); any other method or macro as cel-python evaluates it."""
        member_tree, name = tree.children[0], str(tree.children[1])
        if name not in ("all", "exists"):
            return super().member_dot_arg(tree)
        items = self.visit(member_tree)
        if isinstance(items, CELEvalError):
            return items
        if not isinstance(items, list | dict):
            return CELEvalError(_NO_OVERLOAD, TypeError, ())
        body = self.build_ss_macro_eval(tree)
        combine, result = (
            (_and, celtypes.BoolType(True)) if name == "all" else (_or, celtypes.BoolType(False))
        )
        for item in items:
            result = combine(result, body(item))
            if isinstance(result, celtypes.BoolType) and bool(result) is (name == "exists"):
                break
        return result


def evaluate(
    tree: lark.Tree,
    variables: Mapping[str, Any],
    *,
    steps: int = EVALUATION_STEPS,
    pool: Budget | None = None,
) -> Any:
    """Evaluate a parse tree (``parse``) with ``variables`` (cel-python values) bound, within a budget
    of ``tree_size(tree) + steps`` steps, ``steps`` no more than what is left in ``pool`` (which pays
    for what this evaluation spends beyond its tree's size); returns the cel-python value. Raises
    ``CelCostError`` when the budget runs out, and cel-python's errors for errors at run time (``1 / 0``).

    A step is a node visited (a macro visits its body once per element, so nesting multiplies:
    ``[1,...,10].all(a, [1,...,10].all(b, ...))`` five levels deep is 100,000 visits in 159
    characters), plus, for every operator and function called, the size of its arguments and of its
    result (``_size``): a concatenation or a comparison is as costly as the values it touches, and
    a macro's variable may be used twice (``x + x``), which doubles a value per level at a constant
    count of nodes. An expression without macros visits each node once, so only long chains of
    concatenations or comparisons (each touching what the one before built) spend more than the
    ``steps`` beyond its size. This is the one way Engram evaluates CEL: anything that evaluates a
    condition later (at run time) must go through it. ``benchmarks/cel_cost.py`` measures the
    costliest expressions that fit in ``MAX_EXPRESSION_CHARS``.
    """
    size = tree_size(tree)
    extra = steps if pool is None else max(0, min(steps, pool.left))
    budget = _Budget(size + extra)
    safe: dict[str, Callable[..., Any]] = {
        **base_functions,
        "_&&_": _and,
        "_||_": _or,
        "duration": _duration,
        "matches": _matcher(budget),
    }
    functions = {name: _metered(function, budget) for name, function in safe.items()}
    runner = environment().program(tree, functions=functions)
    evaluator = _MeteredEvaluator(tree, runner.new_activation(), budget)
    try:
        return evaluator.evaluate(dict(variables))
    except _OverBudget:
        shared = ""
        if pool is not None and extra < steps:
            shared = f" (the rest of the {pool.steps} it shares with the expressions checked before it)"
        raise CelCostError(
            f"Evaluating this expression takes more than {size + extra} steps{shared} (a macro "
            "evaluates its body once per element; nested macros multiply that)."
        ) from None
    finally:
        if pool is not None:
            pool.left -= max(0, min(extra, extra - budget.left))
