"""The skill compiler (``memory.procedural.validation``): each rule with a skill that fails it and
one that passes, errors naming the step and the JSON path. Pure functions: no database."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from memory.procedural import cel
from memory.procedural.cel import parsing
from memory.procedural.validation import ToolContract, compile_skill, schema_problems
from tests.factories import PASSWORD_RESET_INPUT, PASSWORD_RESET_STEPS, PASSWORD_RESET_TOOLS, object_schema

TOOLS = {
    name: ToolContract(name, 1, input_schema, output_schema)
    for name, (_, input_schema, output_schema) in PASSWORD_RESET_TOOLS.items()
}


def problems(
    steps: list[dict[str, Any]], input_schema: dict | None = None, tools: dict | None = None
) -> dict[str, list[str]]:
    return compile_skill(
        steps=steps, input_schema=input_schema or PASSWORD_RESET_INPUT, tools=tools or TOOLS
    ).errors()


def steps_with(index: int, **changes: Any) -> list[dict[str, Any]]:
    steps = copy.deepcopy(PASSWORD_RESET_STEPS)
    steps[index].update(changes)
    for key, value in changes.items():
        if value is None:
            del steps[index][key]
    return steps


def test_the_password_reset_skill_compiles_and_pins_its_tools() -> None:
    compiled = compile_skill(steps=PASSWORD_RESET_STEPS, input_schema=PASSWORD_RESET_INPUT, tools=TOOLS)
    assert compiled.problems == []
    assert compiled.tool_versions == {name: 1 for name in TOOLS}


# --- 1. schemas: JSON Schema 2020-12 object schemas ------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "path", "words"),
    [
        (
            {"type": "object", "properties": {"a": {"type": "strin"}}, "required": []},
            "s.properties.a.type",
            "valid JSON Schema",
        ),
        ({"type": "object", "properties": {}, "required": "a"}, "s.required", "valid JSON Schema"),
        ({"type": "string"}, "s.type", '"type": "object"'),
        ({"type": "object", "required": []}, "s.properties", "properties"),
        ({"type": "object", "properties": {}}, "s.required", "required"),
        ({"type": "object", "properties": {"a": {}}, "required": ["b"]}, "s.required[0]", "'b' is required"),
        ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}, 's["$schema"]', "2020-12"),
        ([], "s", "object schema"),
    ],
)
def test_a_schema_must_be_a_valid_2020_12_object_schema(schema: Any, path: str, words: str) -> None:
    found = schema_problems(schema, path="s")
    assert found, schema
    assert found[0].path == path
    assert words in found[0].message


def test_a_valid_object_schema_passes_the_meta_schema() -> None:
    schema = object_schema(
        {"a": {"type": "string"}, "b": {"$ref": "#/$defs/n"}}, ["a"], **{"$defs": {"n": {"type": "integer"}}}
    )
    assert schema_problems(schema, path="s") == []
    assert (
        schema_problems({**schema, "$schema": "https://json-schema.org/draft/2020-12/schema"}, path="s") == []
    )


def test_the_skill_input_schema_is_checked_too() -> None:
    errors = problems(PASSWORD_RESET_STEPS, input_schema={"type": "object", "properties": {}})
    assert "input_schema.required" in errors


# --- 2. every tool exists ------------------------------------------------------------------------------


def test_an_unknown_tool_is_named_with_its_step() -> None:
    errors = problems(steps_with(2, tool="reset_pasword"))
    assert errors == {"steps[2].tool": ["Step 'reset' (#3): No tool 'reset_pasword' in this tenant."]}


# --- 3. params validate against the tool's input schema ------------------------------------------------


def test_a_literal_param_of_the_wrong_type_fails_at_its_path() -> None:
    errors = problems(steps_with(4, params={"question": 5}))
    assert list(errors) == ["steps[4].params.question"]
    assert "5 is not of type 'string'" in errors["steps[4].params.question"][0]
    assert errors["steps[4].params.question"][0].startswith("Step 'follow_up' (#5)")


def test_a_missing_required_param_fails_and_a_value_constraint_of_a_literal_too() -> None:
    assert "steps[4].params" in problems(steps_with(4, params={}))
    errors = problems(steps_with(3, params={**PASSWORD_RESET_STEPS[3]["params"], "template": "welcome"}))
    assert "steps[3].params.template" in errors  # not in the enum


def test_a_reference_of_an_incompatible_type_fails() -> None:
    # expires_in is an integer: the e-mail address must be a string
    errors = problems(
        steps_with(3, params={"to": {"$ref": "steps.send_code.output.expires_in"}, "template": "follow_up"})
    )
    assert list(errors) == ["steps[3].params.to"]
    assert "'steps.send_code.output.expires_in' is an integer" in errors["steps[3].params.to"][0]


def test_a_number_where_an_integer_is_required_fails_an_integer_where_a_number_is_passes() -> None:
    tools = {
        **TOOLS,
        "measure": ToolContract(
            "measure",
            1,
            object_schema({}, []),
            object_schema({"n": {"type": "number"}, "i": {"type": "integer"}}, ["n", "i"]),
        ),
        "wait": ToolContract(
            "wait",
            1,
            object_schema({"seconds": {"type": "integer"}, "ratio": {"type": "number"}}, ["seconds"]),
            object_schema({}, []),
        ),
    }
    base = [{"id": "m", "tool": "measure"}]
    bad = [*base, {"id": "w", "tool": "wait", "params": {"seconds": {"$ref": "steps.m.output.n"}}}]
    good = [
        *base,
        {
            "id": "w",
            "tool": "wait",
            "params": {"seconds": {"$ref": "steps.m.output.i"}, "ratio": {"$ref": "steps.m.output.i"}},
        },
    ]
    assert list(problems(bad, tools=tools)) == ["steps[1].params.seconds"]
    assert problems(good, tools=tools) == {}


def test_value_constraints_are_not_judged_at_a_reference() -> None:
    # verify_code wants a six-digit code (pattern) and send_email an e-mail (format): a reference
    # to a plain string may satisfy them, which only the run can tell
    assert problems(PASSWORD_RESET_STEPS) == {}


def test_an_optional_output_where_a_param_is_required_fails() -> None:
    tools = dict(TOOLS)
    _, inp, out = PASSWORD_RESET_TOOLS["verify_code"]
    tools["verify_code"] = ToolContract("verify_code", 2, inp, {**out, "required": ["verified"]})
    errors = problems(PASSWORD_RESET_STEPS, tools=tools)
    assert list(errors) == ["steps[2].params.user_id"]
    assert "may be absent" in errors["steps[2].params.user_id"][0]


def test_a_whole_object_can_be_passed_by_reference_when_its_shape_fits() -> None:
    tools = {
        "get_user": ToolContract(
            "get_user",
            1,
            object_schema({}, []),
            object_schema({"user": object_schema({"id": {"type": "string"}}, ["id"])}, ["user"]),
        ),
        "audit": ToolContract(
            "audit",
            1,
            object_schema({"who": object_schema({"id": {"type": "string"}}, ["id"])}, ["who"]),
            object_schema({}, []),
        ),
        "audit_strict": ToolContract(
            "audit_strict",
            1,
            object_schema(
                {
                    "who": object_schema(
                        {"id": {"type": "string"}, "email": {"type": "string"}}, ["id", "email"]
                    )
                },
                ["who"],
            ),
            object_schema({}, []),
        ),
    }
    ok = [
        {"id": "u", "tool": "get_user"},
        {"id": "a", "tool": "audit", "params": {"who": {"$ref": "steps.u.output.user"}}},
    ]
    bad = [
        {"id": "u", "tool": "get_user"},
        {"id": "a", "tool": "audit_strict", "params": {"who": {"$ref": "steps.u.output.user"}}},
    ]
    assert problems(ok, tools=tools) == {}
    assert "'email' is a required property" in problems(bad, tools=tools)["steps[1].params.who"][0]


# --- 4. references point to the input or an earlier step's output that has certainly run -------------


@pytest.mark.parametrize(
    ("ref", "words"),
    [
        ("input.phone", "no property 'phone'"),
        ("steps.nope.output", "no step 'nope'"),
        ("steps.notify.output.message_id", "runs after this one"),
        ("steps.reset.result", "steps.<id>.output"),
        ("user.id", "unknown root"),
        ("steps.send_code.output.challenge", "no property 'challenge'"),
    ],
)
def test_a_bad_reference_is_named_with_its_path(ref: str, words: str) -> None:
    errors = problems(steps_with(2, params={"user_id": {"$ref": ref}}))
    assert list(errors) == ["steps[2].params.user_id"], errors
    assert words in errors["steps[2].params.user_id"][0]


def test_a_reference_to_a_step_that_may_be_skipped_fails() -> None:
    conditional = steps_with(2, when='input.channel == "chat"')  # reset may not run
    errors = problems(conditional)
    assert list(errors) == ["steps[3].params.data.link"]
    assert "skipped when its condition is false" in errors["steps[3].params.data.link"][0]
    skipped = steps_with(2, on_error="skip")
    assert "skipped when it fails" in problems(skipped)["steps[3].params.data.link"][0]


def test_a_reference_jumped_over_by_an_on_error_target_fails() -> None:
    jumping = steps_with(1, on_error="notify")  # verify fails: reset is jumped over, notify reads its link
    errors = problems(jumping)
    assert "steps[3].params.data.link" in errors
    assert "jumps over it on error" in errors["steps[3].params.data.link"][0]


def test_an_alias_is_the_step_output() -> None:
    assert problems(steps_with(2, params={"user_id": {"$ref": "identity.user_id"}})) == {}
    assert "steps[2].params.user_id" in problems(
        steps_with(2, params={"user_id": {"$ref": "identity.verified"}})
    )


# --- 5. when: CEL that parses and type-checks as a bool -----------------------------------------------


@pytest.mark.parametrize(
    ("condition", "words"),
    [
        ('input.channel == "chat" &&', "syntax error"),
        ("input.channel", "must be a bool"),
        ("input.phone != ''", "No field 'phone'"),
        ("steps.follow_up.output.answer != ''", "No field 'follow_up'"),  # its own output
        ('identity.verified == "yes"', "Cannot compare a bool with a string"),
        ("size(input.email) + 1.5 > 3", "No operator +"),
        ("lookup(input.email)", "Unknown function lookup()"),
        ("nobody.knows", "Undeclared reference to 'nobody'"),
    ],
)
def test_a_when_that_does_not_type_check_fails(condition: str, words: str) -> None:
    errors = problems(steps_with(4, when=condition))
    assert list(errors) == ["steps[4].when"], errors
    assert words in errors["steps[4].when"][0]


@pytest.mark.parametrize(
    "condition",
    [
        'input.channel == "chat" && identity.verified',
        "size(input.email) > 3 && input.email.endsWith('@example.com')",
        "steps.send_code.output.expires_in > 60 || !identity.verified",
        "has(steps.send_code.output.expires_in) ? steps.send_code.output.expires_in > 0 : true",
        '["chat", "email"].exists(c, c == input.channel)',
        "double(steps.send_code.output.expires_in) / 60.0 >= 1.5",
    ],
)
def test_a_well_typed_when_passes(condition: str) -> None:
    assert problems(steps_with(4, when=condition)) == {}


def test_the_checker_types_what_cel_defines() -> None:
    scope = {"xs": cel.list_of(cel.INT), "m": cel.map_of(cel.STRING)}
    assert cel.check("xs.map(x, x * 2)", scope, expect=None).type == cel.list_of(cel.INT)
    assert cel.check("xs.filter(x, x > 1)", scope, expect=None).type == cel.list_of(cel.INT)
    assert cel.check("m['a'] + 'b'", scope, expect=None).type == cel.STRING
    assert cel.check("'a' in m", scope).type == cel.BOOL
    with pytest.raises(cel.CelCheckError, match="never in"):
        cel.check("'a' in xs", scope)


# --- 6. on_error targets exist and come later --------------------------------------------------------


def test_on_error_targets_must_exist_and_come_later() -> None:
    assert problems(steps_with(1, on_error="nowhere")) == {
        "steps[1].on_error": ["Step 'verify' (#2): No step 'nowhere' to jump to."]
    }
    assert "a jump back would loop" in problems(steps_with(2, on_error="send_code"))["steps[2].on_error"][0]
    assert problems(steps_with(3, on_error="follow_up")) == {}


def test_retries_need_retry() -> None:
    assert "retries needs" in problems(steps_with(2, retries=3))["steps[2].retries"][0]
    assert "1 to 10" in problems(steps_with(0, retries=11))["steps[0].retries"][0]


# --- 7. no unreachable step ---------------------------------------------------------------------------


def test_a_step_whose_condition_is_always_false_never_runs() -> None:
    errors = problems(steps_with(4, when="1 > 2"))
    assert errors == {"steps[4].when": ["Step 'follow_up' (#5): Never runs: its condition is always false."]}
    assert problems(steps_with(4, when="2 > 1")) == {}


# --- 7b. a condition that names no input is evaluated within a step budget ------------------------------


def nested_all(levels: int, items: int = 10) -> str:
    """``[1,...,items].all(v0, [1,...,items].all(v1, ... true))``: ``items ** levels`` evaluations."""
    values = "[" + ",".join(str(i) for i in range(1, items + 1)) + "]"
    text = "true"
    for level in reversed(range(levels)):
        text = f"{values}.all(v{level},{text})"
    return text


def doubling(levels: int) -> str:
    """A list twice as long per level (``a + a``), 2 ** levels elements at the end."""
    text = f"size(v{levels}) > 0"
    for level in reversed(range(1, levels + 1)):
        text = f"[v{level - 1}+v{level - 1}].all(v{level},{text})"
    return f"[[1]].all(v0,{text})"


def shared(levels: int) -> str:
    """A list holding the one before twice; comparing the last walks 2 ** levels leaves."""
    text = f"v{levels - 1} == v{levels - 1}"
    for level in reversed(range(levels)):
        prev = "1" if level == 0 else f"v{level - 1}"
        text = f"[[{prev},{prev}]].all(v{level},{text})"
    return text


def test_a_constant_condition_too_costly_to_evaluate_is_refused_at_once() -> None:
    cel.check("true", {})  # the parser is built on first use
    condition = nested_all(5)  # 159 characters, 10 ** 5 evaluations of its body
    assert len(condition) == 159
    times = []
    for _ in range(3):  # the best of three: the machine may be busy with something else
        parsing._parse.cache_clear()
        started = time.thread_time()
        errors = problems(steps_with(4, when=condition))
        times.append(time.thread_time() - started)
    assert list(errors) == ["steps[4].when"], errors
    assert errors["steps[4].when"][0].startswith(
        "Step 'follow_up' (#5): when: Evaluating this expression takes"
    )
    assert "always true or always false" in errors["steps[4].when"][0]
    assert min(times) < 0.1, times


def test_a_constant_condition_with_a_small_macro_is_still_evaluated() -> None:
    assert cel.check("[1, 2, 3].all(x, x > 0)", {}).constant is True
    assert cel.check("[1, 2, 3].all(a, [1, 2, 3].all(b, a + b > 1))", {}).constant is True
    assert problems(steps_with(4, when="[1, 2, 3].exists(x, x > 5)")) == {
        "steps[4].when": ["Step 'follow_up' (#5): Never runs: its condition is always false."]
    }


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("condition", "refused"),
    [
        (doubling(24), True),  # 16 million elements
        (shared(22), True),  # 4 million comparisons
        (" || ".join(["1/0 > 0"] * 24), False),  # each error quoted whole in the next one: 280 MB
        ("[" + ",".join(["0"] * 24) + "].all(x, 1/x > 0)", False),  # the same through all()
        (f"duration('{'a' * 24}!') > duration('1s')", False),  # cel-python's check backtracks: 2 ** 24
        (" || ".join(["'b'.matches('\\\\pL{1000}')"] * 20), True),  # 80 ms to fail to compile, each
    ],
    ids=["doubling", "shared", "errors-or", "errors-all", "duration", "regex"],
)
def test_every_way_to_make_evaluation_costly_is_bounded(condition: str, refused: bool) -> None:
    cel.check("true", {})
    # CPU time of this thread: what the cost budget bounds, whatever else runs on the machine
    started = time.thread_time()
    try:
        cel.check(condition, {})
        outcome = False
    except cel.CelCostError:
        outcome = True
    assert time.thread_time() - started < 1.0
    assert outcome is refused


def many_steps(conditions: list[str]) -> list[dict[str, Any]]:
    """The first password-reset step, then one step per condition."""
    steps = [copy.deepcopy(PASSWORD_RESET_STEPS[0])]
    for i, condition in enumerate(conditions, start=1):
        steps.append(
            {
                "id": f"s{i}",
                "tool": "send_email",
                "when": condition,
                "params": {"to": {"$ref": "input.email"}, "template": "follow_up", "data": {"n": i}},
            }
        )
    return steps


def test_the_constant_conditions_of_a_skill_share_one_budget() -> None:
    # each within its own budget, together far over what a skill may take: the later ones are refused
    condition = "[" + ",".join(str(i) for i in range(1, 41)) + "].all(x, x > 0)"
    cel.check("true", {})
    started = time.thread_time()
    errors = problems(many_steps([condition] * 100))
    elapsed = time.thread_time() - started
    assert cel.check(condition, {}).constant is True
    refused = [path for path in errors if path.endswith(".when")]
    assert refused and "steps[1].when" not in refused and "steps[100].when" in refused, errors
    assert "the rest of the 10000" in errors["steps[100].when"][0]
    assert elapsed < 2.0, elapsed


def test_the_conditions_of_a_skill_are_bounded_in_all() -> None:
    condition = "input.email != '" + "x" * 1980 + "'"
    assert problems(many_steps([condition] * 10)) == {}
    assert problems(many_steps([condition] * 11)) == {
        "steps": [
            f"The steps' when conditions hold at most 20000 characters in all ({11 * len(condition)} here)."
        ]
    }


def test_the_parse_cache_is_bounded_by_nodes_not_entries() -> None:
    cache = parsing._TreeCache(max_nodes=1000)
    for i in range(100):
        cache(f"input.n + {i} > 3")
    assert 900 < cache.nodes <= 1000 and cache.nodes == sum(size for _, size in cache.trees.values())
    assert "input.n + 99 > 3" in cache.trees and "input.n + 0 > 3" not in cache.trees  # the oldest went
    big = "[" + ",".join(["1"] * 20) + "] == []"  # over a tenth of the cache: parsed, not kept
    assert cel.tree_size(cache(big)) > 100 and big not in cache.trees


# --- the step's own shape -----------------------------------------------------------------------------


def test_step_shape_errors() -> None:
    assert "Unknown step field 'tools'" in problems(steps_with(0, tools="x"))["steps[0].tools"][0]
    assert "Duplicate step id" in problems(steps_with(1, id="send_code"))["steps[1].id"][0]
    assert "reserved" in problems(steps_with(1, id="input"))["steps[1].id"][0]
    assert "lowercase letter" in problems(steps_with(1, id="Verify-Code"))["steps[1].id"][0]
    assert "already binds" in problems(steps_with(2, output_as="identity"))["steps[2].output_as"][0]
    assert problems([], PASSWORD_RESET_INPUT) == {"steps": ["A skill needs a list of at least one step."]}


def test_a_50_step_skill_compiles() -> None:
    """The shape the benchmark times (benchmarks/skill_match.py): every step reads the input and
    the first step's output."""
    steps = [copy.deepcopy(PASSWORD_RESET_STEPS[0])]
    for i in range(1, 50):
        steps.append(
            {
                "id": f"s{i}",
                "tool": "send_email",
                "when": f'input.channel == "chat" || steps.send_code.output.expires_in > {i}',
                "params": {"to": {"$ref": "input.email"}, "template": "follow_up", "data": {"n": i}},
            }
        )
    assert problems(steps) == {}


def test_the_readme_example_is_the_password_reset_skill_and_compiles() -> None:
    """The skills guide's complete example (its tools and its skill) is valid, and the same as the
    tests'. tests/docs runs its blocks against a live server."""
    import json
    import re

    from tests.factories import BASE_DIR, PASSWORD_RESET

    readme = (BASE_DIR / "docs" / "guides" / "agents" / "skills.md").read_text()
    tools = [json.loads(body) for body in re.findall(r"^tool '(\{.*?\})'$", readme, re.S | re.M)]
    skill = json.loads(
        readme.split("and the skill, as an agent proposes it")[1].split("<<'JSON'\n")[1].split("\nJSON\n")[0]
    )
    contracts = {t["name"]: ToolContract(t["name"], 1, t["input_schema"], t["output_schema"]) for t in tools}
    assert {t["name"]: (t["description"], t["input_schema"], t["output_schema"]) for t in tools} == {
        name: tuple(value) for name, value in PASSWORD_RESET_TOOLS.items()
    }
    assert skill == PASSWORD_RESET
    assert compile_skill(steps=skill["steps"], input_schema=skill["input_schema"], tools=contracts).ok
