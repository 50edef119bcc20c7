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

The package's parts: ``types`` (CEL types and those of JSON Schemas), ``parsing`` (cel-python's
parser and the tree cache), ``evaluation`` (cel-python's evaluator within a cost budget) and
``checker`` (the type rules and ``check``). Callers use the names below; the other types
(``cel.types.DOUBLE``, ...) are the checker's.
"""

from .checker import CheckResult, check
from .evaluation import (
    EVALUATION_STEPS,
    REGEX_COMPILE_STEPS,
    SKILL_EVALUATION_STEPS,
    Budget,
    CelCostError,
    evaluate,
)
from .parsing import MAX_EXPRESSION_CHARS, CelCheckError, parse, tree_size
from .types import BOOL, DYN, INT, STRING, CelType, from_schema, list_of, map_of, object_of, type_of_value

__all__ = [
    "BOOL", "DYN", "EVALUATION_STEPS", "INT", "MAX_EXPRESSION_CHARS", "REGEX_COMPILE_STEPS",
    "SKILL_EVALUATION_STEPS", "STRING", "Budget", "CelCheckError", "CelCostError", "CelType",
    "CheckResult", "check", "evaluate", "from_schema", "list_of", "map_of", "object_of", "parse",
    "tree_size", "type_of_value",
]  # fmt: skip
