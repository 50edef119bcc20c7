"""Static type checking of CEL expressions (Google's Common Expression Language) over cel-python's
parse tree, against variables typed by JSON Schemas.

cel-python (``celpy``) parses CEL with the grammar of the CEL specification but only checks types
when it evaluates. A skill's ``when`` condition must be known to be well typed before anyone can
publish the skill, so this module walks ``celpy``'s ``lark`` tree and gives every node a type by the
rules of the CEL language definition (github.com/google/cel-spec, ``doc/langdef.md``: "Standard
definitions", "Macros"). Nothing is evaluated, except an expression that names no variable at all
(``1 > 2``), which cel-python evaluates to tell whether a step can ever run, within a cost budget
(``EVALUATION_STEPS``, see ``evaluate``).

Types: ``bool``, ``int``, ``uint``, ``double``, ``string``, ``bytes``, ``null_type``, ``list(T)``,
``map(string, T)``, objects with known fields (from a JSON Schema object's ``properties``),
``timestamp``, ``duration`` and ``dyn`` (not known statically: anything goes, as in CEL's checker).
As in CEL, there are no implicit numeric conversions (``1 + 1.5`` is an error; ``double(1) + 1.5``
is not), while ordering comparisons between ``int``, ``uint`` and ``double`` are allowed.

Supported: literals, ``! - * / % + < <= > >= == != in && || ?:``, field selection and indexing,
list and map literals, ``has()``, ``size()``, the string functions ``contains``, ``startsWith``,
``endsWith``, ``matches``, the conversions ``int uint double string bytes bool dyn timestamp
duration``, and the macros ``all``, ``exists``, ``exists_one``, ``map``, ``filter``. Any other
function, and message construction (``Msg{...}``), is refused with the name of what is unknown.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import celpy
import lark
import re2
from celpy import celtypes
from celpy.evaluation import CELEvalError, Evaluator, base_functions

MAX_EXPRESSION_CHARS = 2000
# What evaluating an expression may cost beyond one visit of each node of its tree (see ``evaluate``):
# about 10 ms, while ``[1, 2, 3].all(x, x > 0)`` costs about 100; and what the conditions of one
# skill may cost so in all (a ``Budget`` they share).
EVALUATION_STEPS = 1000
SKILL_EVALUATION_STEPS = 10 * EVALUATION_STEPS


@dataclass(frozen=True)
class CelType:
    """A CEL type. ``elem`` is a list's element or a map's value type; ``fields`` an object's known
    fields; ``closed`` objects (``additionalProperties: false``) refuse unknown fields."""

    kind: str
    elem: CelType | None = None
    fields: tuple[tuple[str, CelType], ...] = ()
    closed: bool = False

    def __str__(self) -> str:
        if self.kind == "list":
            return f"list({self.elem})"
        if self.kind == "map":
            return f"map(string, {self.elem})"
        if self.kind == "object":
            return "object{" + ", ".join(name for name, _ in self.fields) + "}"
        return self.kind

    def field_type(self, name: str) -> CelType | None:
        for key, value in self.fields:
            if key == name:
                return value
        return None


DYN = CelType("dyn")
BOOL = CelType("bool")
INT = CelType("int")
UINT = CelType("uint")
DOUBLE = CelType("double")
STRING = CelType("string")
BYTES = CelType("bytes")
NULL = CelType("null_type")
TIMESTAMP = CelType("timestamp")
DURATION = CelType("duration")
TYPE = CelType("type")
NUMERIC = frozenset({"int", "uint", "double"})
ORDERED = frozenset({"int", "uint", "double", "string", "bytes", "bool", "timestamp", "duration"})


def list_of(elem: CelType) -> CelType:
    return CelType("list", elem=elem)


def map_of(value: CelType) -> CelType:
    return CelType("map", elem=value)


def object_of(fields: Mapping[str, CelType], *, closed: bool = False) -> CelType:
    return CelType("object", fields=tuple(sorted(fields.items())), closed=closed)


_SCALARS = {"string": STRING, "integer": INT, "number": DOUBLE, "boolean": BOOL, "null": NULL}


def from_schema(schema: Any) -> CelType:
    """The CEL type of the values a JSON Schema (2020-12) describes.

    ``type`` string/integer/number/boolean/null map to string/int/double/bool/null_type; ``array``
    to ``list`` of its ``items``; ``object`` to an object of its ``properties`` (closed when
    ``additionalProperties`` is false; a ``map`` when it has only ``additionalProperties``).
    ``["T", "null"]`` counts as ``T``; any other union, ``$ref`` or a schema without ``type`` is
    ``dyn``. A ``const`` or uniform ``enum`` gives the type of its values.
    """
    if not isinstance(schema, dict):
        return DYN
    kind = schema.get("type")
    if isinstance(kind, list):
        rest = [k for k in kind if k != "null"]
        kind = rest[0] if len(rest) == 1 else None
    if kind is None:
        values = [schema["const"]] if "const" in schema else schema.get("enum")
        if isinstance(values, list) and values:
            types = {type_of_value(v) for v in values}
            return types.pop() if len(types) == 1 else DYN
        return DYN
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "array":
        items = schema.get("items")
        return list_of(from_schema(items) if isinstance(items, dict) else DYN)
    if kind == "object":
        properties = schema.get("properties")
        extra = schema.get("additionalProperties", True)
        if not properties and isinstance(extra, dict):
            return map_of(from_schema(extra))
        props = properties if isinstance(properties, dict) else {}
        closed = extra is False or (bool(props) and not isinstance(extra, dict))
        return object_of({k: from_schema(v) for k, v in props.items()}, closed=closed)
    return DYN


def type_of_value(value: Any) -> CelType:
    """The CEL type of a JSON value (``1`` is ``int``, ``1.5`` is ``double``)."""
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT
    if isinstance(value, float):
        return DOUBLE
    if isinstance(value, str):
        return STRING
    if value is None:
        return NULL
    if isinstance(value, list):
        return list_of(DYN)
    return map_of(DYN)


class CelCheckError(Exception):
    """The expression does not parse or is not well typed. ``column`` is 1-based when known."""

    def __init__(self, message: str, *, column: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.column = column

    def __str__(self) -> str:
        return self.message if self.column is None else f"{self.message} (column {self.column})"


@dataclass(frozen=True)
class CheckResult:
    """A well-typed expression: its ``type``, and ``constant`` (its value, when it names no
    variable and evaluates without error; else None)."""

    type: CelType
    constant: object = None
    variables: frozenset[str] = field(default_factory=frozenset)


@functools.cache
def _environment() -> celpy.Environment:
    return celpy.Environment()


def parse(text: str) -> lark.Tree:
    """Parse ``text`` as CEL. Raises ``CelCheckError`` (with the column) for a syntax error."""
    if not isinstance(text, str) or not text.strip():
        raise CelCheckError("An expression is required.")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise CelCheckError(f"At most {MAX_EXPRESSION_CHARS} characters.")
    return _parse(text)


def _compile(text: str) -> lark.Tree:
    try:
        return _environment().compile(text)
    except celpy.CELParseError as exc:
        column = getattr(exc, "column", None)
        first = str(exc).splitlines()[0] if str(exc) else "syntax error"
        raise CelCheckError(f"CEL syntax error near {first!r}", column=column) from None
    except RecursionError:
        raise CelCheckError("The expression nests too deeply.") from None


class _TreeCache:
    """Parse trees by their text, least recently used first out, holding at most ``max_nodes`` nodes
    in all (``tree_size``). Parsing is most of a compile (lark's LALR parser: about 1 ms for a
    condition of 20 tokens) and the editor compiles the whole skill again at every pause in typing,
    so trees are kept (the checker only reads them); a tree costs about 700 bytes a node, up to 7 MB
    for 2,000 characters, so the cache is bounded by nodes, not entries. Thread-safe."""

    def __init__(self, max_nodes: int) -> None:
        self.max_nodes = max_nodes
        self.trees: OrderedDict[str, tuple[lark.Tree, int]] = OrderedDict()
        self.nodes = 0
        self.lock = threading.Lock()

    def __call__(self, text: str) -> lark.Tree:
        with self.lock:
            hit = self.trees.get(text)
            if hit is not None:
                self.trees.move_to_end(text)
                return hit[0]
        tree = _compile(text)
        size = tree_size(tree)
        if size <= self.max_nodes // 10:  # one huge tree may not push out everything else
            with self.lock:
                if text not in self.trees:
                    self.trees[text] = (tree, size)
                    self.nodes += size
                while self.nodes > self.max_nodes:
                    _, (_, dropped) = self.trees.popitem(last=False)
                    self.nodes -= dropped
        return tree

    def cache_clear(self) -> None:
        with self.lock:
            self.trees.clear()
            self.nodes = 0


# about 70 MB; a typical condition has 20 to 80 nodes
_parse = _TreeCache(max_nodes=100_000)


def check(
    text: str, variables: Mapping[str, CelType], *, expect: CelType | None = BOOL, pool: Budget | None = None
) -> CheckResult:
    """Parse and type-check ``text`` with ``variables`` in scope; with ``expect``, the expression
    must have that type (or ``dyn``). An expression that names no variable is evaluated
    (``evaluate``, drawing on ``pool`` when given). Raises ``CelCheckError`` naming the first
    problem (``CelCostError`` for an evaluation over its budget)."""
    tree = parse(text)
    checker = _Checker(dict(variables))
    try:
        result = checker.visit(tree)
    except RecursionError:
        raise CelCheckError("The expression nests too deeply.") from None
    if expect is not None and result.kind not in (expect.kind, "dyn"):
        raise CelCheckError(f"The expression must be {_a(expect)}, not {_a(result)}.")
    constant = None
    if not checker.used:
        try:
            constant = _to_python(evaluate(tree, {}, pool=pool))
        except CelCostError as exc:
            raise CelCostError(
                f"{exc.message} It names no input, so it is always true or always false: write that."
            ) from None
        except Exception:  # an error at run time (1 / 0): no constant to report
            constant = None
    return CheckResult(result, constant, frozenset(checker.used))


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


def tree_size(tree: lark.Tree) -> int:
    """The nodes of a parse tree, a token counting its characters: what one evaluation visiting each
    node once and touching each literal once (a string literal costs its length) spends."""
    return 1 + sum(
        len(child) if isinstance(child, lark.Token) else 1
        for node in tree.iter_subtrees()
        for child in node.children
    )


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
    runner = _environment().program(tree, functions=functions)
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


def _to_python(value: Any) -> object:
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    return value


def _a(found: CelType) -> str:
    """The type with its indefinite article: ``an int``, ``a string``."""
    text = str(found)
    return f"{'an' if text[:1] in 'aeiou' else 'a'} {text}"


def _column(node: Any) -> int | None:
    meta = getattr(node, "meta", None)
    return getattr(meta, "column", None) if meta is not None and not meta.empty else None


def _same(a: CelType, b: CelType) -> bool:
    return a.kind == "dyn" or b.kind == "dyn" or a.kind == b.kind


def _join(a: CelType, b: CelType) -> CelType:
    """The type of a value that is either an ``a`` or a ``b`` (``dyn`` when they differ)."""
    if a == b:
        return a
    if a.kind == "null_type":
        return b
    if b.kind == "null_type":
        return a
    if a.kind == b.kind and a.kind in ("list", "map"):
        return CelType(a.kind, elem=_join(a.elem or DYN, b.elem or DYN))
    return DYN


_ARITHMETIC = {
    "+": {("int", "int"): INT, ("uint", "uint"): UINT, ("double", "double"): DOUBLE,
          ("string", "string"): STRING, ("bytes", "bytes"): BYTES, ("timestamp", "duration"): TIMESTAMP,
          ("duration", "timestamp"): TIMESTAMP, ("duration", "duration"): DURATION},
    "-": {("int", "int"): INT, ("uint", "uint"): UINT, ("double", "double"): DOUBLE,
          ("timestamp", "timestamp"): DURATION, ("timestamp", "duration"): TIMESTAMP,
          ("duration", "duration"): DURATION},
    "*": {("int", "int"): INT, ("uint", "uint"): UINT, ("double", "double"): DOUBLE},
    "/": {("int", "int"): INT, ("uint", "uint"): UINT, ("double", "double"): DOUBLE},
    "%": {("int", "int"): INT, ("uint", "uint"): UINT},
}  # fmt: skip
_OPERATOR_NODES = {
    "addition_add": "+", "addition_sub": "-", "multiplication_mul": "*", "multiplication_div": "/",
    "multiplication_mod": "%", "relation_lt": "<", "relation_le": "<=", "relation_gt": ">",
    "relation_ge": ">=", "relation_eq": "==", "relation_ne": "!=", "relation_in": "in",
}  # fmt: skip
_CONVERSIONS = {
    "int": (INT, {"int", "uint", "double", "string", "timestamp"}),
    "uint": (UINT, {"int", "uint", "double", "string"}),
    "double": (DOUBLE, {"int", "uint", "double", "string"}),
    "string": (STRING, {"int", "uint", "double", "string", "bytes", "bool", "timestamp", "duration"}),
    "bytes": (BYTES, {"bytes", "string"}),
    "bool": (BOOL, {"bool", "string"}),
    "timestamp": (TIMESTAMP, {"string", "timestamp", "int"}),
    "duration": (DURATION, {"string", "duration"}),
}
_STRING_PREDICATES = ("contains", "startsWith", "endsWith", "matches")
_MACROS = ("all", "exists", "exists_one", "map", "filter")


class _Checker:
    """Types one parse tree; ``used`` collects the variables it reads."""

    def __init__(self, variables: dict[str, CelType]) -> None:
        self.scopes: list[dict[str, CelType]] = [variables]
        self.used: set[str] = set()

    def fail(self, message: str, node: Any) -> CelCheckError:
        return CelCheckError(message, column=_column(node))

    def visit(self, node: Any) -> CelType:
        if not isinstance(node, lark.Tree):
            raise self.fail(f"Unexpected token {node!r}.", node)
        handler = getattr(self, f"visit_{node.data}", None)
        if handler is None:
            raise self.fail(f"{node.data.replace('_', ' ')} is not supported in conditions.", node)
        return handler(node)

    # --- operators --------------------------------------------------------------------------------

    def visit_expr(self, node: lark.Tree) -> CelType:
        if len(node.children) == 1:
            return self.visit(node.children[0])
        condition, then, otherwise = node.children
        self._expect_bool(self.visit(condition), condition, "The condition of ?:")
        a, b = self.visit(then), self.visit(otherwise)
        if not _same(a, b) and NULL not in (a, b):
            raise self.fail(f"The branches of ?: have different types ({a} and {b}).", node)
        return _join(a, b)

    def _logical(self, node: lark.Tree, operator: str) -> CelType:
        if len(node.children) == 1:
            return self.visit(node.children[0])
        for child in node.children:
            self._expect_bool(self.visit(child), child, f"An operand of {operator}")
        return BOOL

    def visit_conditionalor(self, node: lark.Tree) -> CelType:
        return self._logical(node, "||")

    def visit_conditionaland(self, node: lark.Tree) -> CelType:
        return self._logical(node, "&&")

    def _expect_bool(self, found: CelType, node: Any, what: str) -> None:
        if found.kind not in ("bool", "dyn"):
            raise self.fail(f"{what} must be a bool, not {_a(found)}.", node)

    def _binary(self, node: lark.Tree) -> CelType:
        if len(node.children) == 1:
            return self.visit(node.children[0])
        op_node, right_node = node.children
        operator = _OPERATOR_NODES[op_node.data]
        left, right = self.visit(op_node.children[0]), self.visit(right_node)
        return self._operator(operator, left, right, node)

    visit_relation = _binary
    visit_addition = _binary
    visit_multiplication = _binary

    def _operator(self, operator: str, left: CelType, right: CelType, node: Any) -> CelType:
        if operator in ("==", "!="):
            comparable = (
                _same(left, right)
                or {left.kind, right.kind} <= NUMERIC
                or "null_type" in (left.kind, right.kind)
            )
            if not comparable:
                raise self.fail(f"Cannot compare {_a(left)} with {_a(right)} ({operator}).", node)
            return BOOL
        if operator in ("<", "<=", ">", ">="):
            if left.kind == "dyn" or right.kind == "dyn":
                return BOOL
            if left.kind in ORDERED and (left.kind == right.kind or {left.kind, right.kind} <= NUMERIC):
                return BOOL
            raise self.fail(f"Cannot order {_a(left)} and {_a(right)} ({operator}).", node)
        if operator == "in":
            if right.kind == "dyn":
                return BOOL
            if right.kind in ("list", "map", "object"):
                elem = STRING if right.kind == "object" else (right.elem or DYN)
                if right.kind == "map":
                    elem = STRING
                if not _same(left, elem) and not {left.kind, elem.kind} <= NUMERIC:
                    raise self.fail(f"A {left} is never in {_a(right)}.", node)
                return BOOL
            raise self.fail(f"'in' needs a list or a map on its right, not {_a(right)}.", node)
        if left.kind == "dyn" or right.kind == "dyn":
            other = right if left.kind == "dyn" else left
            return other if operator in ("*", "/", "%") and other.kind in NUMERIC else DYN
        if operator == "+" and left.kind == "list" and right.kind == "list":
            return list_of(_join(left.elem or DYN, right.elem or DYN))
        result = _ARITHMETIC[operator].get((left.kind, right.kind))
        if result is None:
            hint = (
                " (CEL does not convert numbers implicitly: use double() or int())"
                if {
                    left.kind,
                    right.kind,
                }
                <= NUMERIC
                else ""
            )
            raise self.fail(f"No operator {operator} for {_a(left)} and {_a(right)}{hint}.", node)
        return result

    def visit_unary(self, node: lark.Tree) -> CelType:
        if len(node.children) == 1:
            return self.visit(node.children[0])
        op, operand_node = node.children
        operand = self.visit(operand_node)
        if op.data == "unary_not":
            self._expect_bool(operand, operand_node, "The operand of !")
            return BOOL
        if operand.kind not in ("int", "double", "duration", "dyn"):
            raise self.fail(f"Cannot negate {_a(operand)}.", node)
        return operand

    # --- members ----------------------------------------------------------------------------------

    def visit_member(self, node: lark.Tree) -> CelType:
        return self.visit(node.children[0])

    def visit_primary(self, node: lark.Tree) -> CelType:
        return self.visit(node.children[0])

    def visit_paren_expr(self, node: lark.Tree) -> CelType:
        return self.visit(node.children[0])

    def _select(self, target: CelType, name: str, node: Any) -> CelType:
        if target.kind == "dyn":
            return DYN
        if target.kind == "map":
            return target.elem or DYN
        if target.kind == "object":
            found = target.field_type(name)
            if found is not None:
                return found
            if not target.closed:
                return DYN
            known = ", ".join(k for k, _ in target.fields) or "none"
            raise self.fail(f"No field {name!r} here (known: {known}).", node)
        raise self.fail(f"Cannot select field {name!r} of {_a(target)}.", node)

    def visit_member_dot(self, node: lark.Tree) -> CelType:
        target_node, name = node.children
        return self._select(self.visit(target_node), str(name), node)

    def visit_member_index(self, node: lark.Tree) -> CelType:
        target_node, index_node = node.children
        target, index = self.visit(target_node), self.visit(index_node)
        if target.kind == "dyn":
            return DYN
        if target.kind == "list":
            if index.kind not in ("int", "uint", "dyn"):
                raise self.fail(f"A list index must be an int, not {_a(index)}.", index_node)
            return target.elem or DYN
        if target.kind in ("map", "object"):
            if index.kind not in ("string", "dyn"):
                raise self.fail(f"A key here must be a string, not {_a(index)}.", index_node)
            key = _string_literal(index_node)
            if target.kind == "object" and key is not None:
                return self._select(target, key, node)
            return target.elem or DYN if target.kind == "map" else DYN
        raise self.fail(f"Cannot index {_a(target)}.", node)

    def visit_ident(self, node: lark.Tree) -> CelType:
        name = str(node.children[0])
        for scope in reversed(self.scopes):
            if name in scope:
                if scope is self.scopes[0]:
                    self.used.add(name)
                return scope[name]
        known = ", ".join(sorted(self.scopes[0])) or "none"
        raise self.fail(f"Undeclared reference to {name!r} (in scope: {known}).", node)

    def visit_dot_ident(self, node: lark.Tree) -> CelType:
        raise self.fail("Leading-dot names are not supported.", node)

    visit_dot_ident_arg = visit_dot_ident

    def visit_member_object(self, node: lark.Tree) -> CelType:
        raise self.fail("Message construction is not supported in conditions.", node)

    # --- literals ---------------------------------------------------------------------------------

    def visit_literal(self, node: lark.Tree) -> CelType:
        token = cast(lark.Token, node.children[0])
        return {
            "INT_LIT": INT,
            "UINT_LIT": UINT,
            "FLOAT_LIT": DOUBLE,
            "STRING_LIT": STRING,
            "MLSTRING_LIT": STRING,
            "BYTES_LIT": BYTES,
            "BOOL_LIT": BOOL,
            "NULL_LIT": NULL,
        }[token.type]

    def _items(self, node: lark.Tree) -> list[Any]:
        return list(node.children[0].children) if node.children else []

    def visit_list_lit(self, node: lark.Tree) -> CelType:
        elem: CelType | None = None
        for item in self._items(node):
            found = self.visit(item)
            elem = found if elem is None else _join(elem, found)
        return list_of(elem or DYN)

    def visit_map_lit(self, node: lark.Tree) -> CelType:
        items = self._items(node)
        value: CelType | None = None
        for key_node, value_node in zip(items[::2], items[1::2], strict=True):
            key = self.visit(key_node)
            if key.kind not in ("string", "int", "uint", "bool", "dyn"):
                raise self.fail(f"A map key cannot be {_a(key)}.", key_node)
            found = self.visit(value_node)
            value = found if value is None else _join(value, found)
        return map_of(value or DYN)

    # --- calls ------------------------------------------------------------------------------------

    def visit_ident_arg(self, node: lark.Tree) -> CelType:
        name = str(node.children[0])
        args = list(node.children[1].children) if len(node.children) > 1 else []
        if name == "has":
            if len(args) != 1 or _selection(args[0]) is None:
                raise self.fail("has() takes one field selection, such as has(input.phone).", node)
            target_node, field_name = _selection(args[0])  # type: ignore[misc]
            target = self.visit(target_node)
            if target.kind not in ("object", "map", "dyn"):
                raise self.fail(f"has() needs a field of an object or map, not of {_a(target)}.", node)
            if target.kind == "object" and target.closed and target.field_type(field_name) is None:
                self._select(target, field_name, node)  # raises with the known fields
            return BOOL
        types = [self.visit(arg) for arg in args]
        if name == "size":
            if len(types) != 1:
                raise self.fail("size() takes one argument.", node)
            return self._size(types[0], node)
        if name in _CONVERSIONS:
            result, accepted = _CONVERSIONS[name]
            if len(types) != 1:
                raise self.fail(f"{name}() takes one argument.", node)
            if types[0].kind not in accepted | {"dyn"}:
                raise self.fail(f"{name}() cannot convert {_a(types[0])}.", node)
            return result
        if name == "dyn":
            if len(types) != 1:
                raise self.fail("dyn() takes one argument.", node)
            return DYN
        if name == "type":
            return TYPE
        raise self.fail(f"Unknown function {name}().", node)

    def _size(self, target: CelType, node: Any) -> CelType:
        if target.kind not in ("string", "bytes", "list", "map", "object", "dyn"):
            raise self.fail(f"size() is not defined for {_a(target)}.", node)
        return INT

    def visit_member_dot_arg(self, node: lark.Tree) -> CelType:
        target_node, name_token = node.children[0], str(node.children[1])
        args = list(node.children[2].children) if len(node.children) > 2 else []
        if name_token in _MACROS:
            return self._macro(name_token, target_node, args, node)
        target = self.visit(target_node)
        types = [self.visit(arg) for arg in args]
        if name_token == "size" and not types:
            return self._size(target, node)
        if name_token in _STRING_PREDICATES:
            if len(types) != 1:
                raise self.fail(f"{name_token}() takes one argument.", node)
            for found, what in ((target, "receiver"), (types[0], "argument")):
                if found.kind not in ("string", "dyn"):
                    raise self.fail(f"The {what} of {name_token}() must be a string, not {_a(found)}.", node)
            return BOOL
        raise self.fail(f"Unknown method .{name_token}() of {_a(target)}.", node)

    def _macro(self, name: str, target_node: Any, args: list[Any], node: Any) -> CelType:
        target = self.visit(target_node)
        if len(args) != 2 or _identifier(args[0]) is None:
            raise self.fail(f".{name}() takes a variable name and an expression: .{name}(x, ...).", node)
        if target.kind == "list":
            variable = target.elem or DYN
        elif target.kind in ("map", "object"):
            variable = STRING  # macros over a map range over its keys
        elif target.kind == "dyn":
            variable = DYN
        else:
            raise self.fail(f".{name}() needs a list or a map, not {_a(target)}.", node)
        self.scopes.append({_identifier(args[0]): variable})  # type: ignore[dict-item]
        try:
            body = self.visit(args[1])
        finally:
            self.scopes.pop()
        if name == "map":
            return list_of(body)
        self._expect_bool(body, args[1], f"The predicate of .{name}()")
        return list_of(variable) if name == "filter" else BOOL


def _descend(node: Any) -> Any:
    """The one meaningful node under a chain of single-child wrappers (``expr`` → ... → ``member``)."""
    while (
        isinstance(node, lark.Tree)
        and len(node.children) == 1
        and node.data
        in (
            "expr",
            "conditionalor",
            "conditionaland",
            "relation",
            "addition",
            "multiplication",
            "unary",
            "member",
            "primary",
        )
    ):
        node = node.children[0]
    return node


def _selection(node: Any) -> tuple[Any, str] | None:
    inner = _descend(node)
    if isinstance(inner, lark.Tree) and inner.data == "member_dot":
        return inner.children[0], str(inner.children[1])
    return None


def _identifier(node: Any) -> str | None:
    inner = _descend(node)
    if isinstance(inner, lark.Tree) and inner.data == "ident":
        return str(inner.children[0])
    return None


def _string_literal(node: Any) -> str | None:
    inner = _descend(node)
    if (
        isinstance(inner, lark.Tree)
        and inner.data == "literal"
        and cast(lark.Token, inner.children[0]).type == "STRING_LIT"
    ):
        text = str(inner.children[0])
        if text[:1] in "\"'" and "\\" not in text:
            return text[1:-1]
    return None
