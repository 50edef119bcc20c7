"""The static type checker: a type for every node of a parse tree, by the rules of the CEL language
definition; an expression that names no variable is evaluated for its constant."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import lark
from celpy import celtypes

from .evaluation import Budget, CelCostError, evaluate
from .parsing import CelCheckError, parse
from .types import (
    BOOL,
    BYTES,
    DOUBLE,
    DURATION,
    DYN,
    INT,
    NULL,
    NUMERIC,
    ORDERED,
    STRING,
    TIMESTAMP,
    TYPE,
    UINT,
    CelType,
    list_of,
    map_of,
)


@dataclass(frozen=True)
class CheckResult:
    """A well-typed expression: its ``type``, and ``constant`` (its value, when it names no
    variable and evaluates without error; else None)."""

    type: CelType
    constant: object = None
    variables: frozenset[str] = field(default_factory=frozenset)


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
