"""What an extraction job asks a language model and how its answer is read: the prompt over the new
messages and the nearest existing memories, and the strict reading of the answer (every item
well formed, or the whole answer refused, so a job never applies part of one)."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.errors import DomainError
from memory.knowledge.services.data import FactObject

EXTRACTION_PROMPT = (
    "You keep the long-term memory of an assistant. From the NEW MESSAGES, extract what is worth "
    "remembering later: atomic, self-contained statements (one fact, preference, plan or event each, "
    "naming who, and when if the messages say), and the facts they state as subject-predicate-object "
    'triples. Compare each statement with the EXISTING MEMORIES (each with its id): action "add" '
    'when it is new; "update" with the id of the memory it replaces when it changes what that memory '
    'says (another time, amount, place, count, or a reversed preference); "noop" with the id when '
    "that memory already says it. Answer with JSON only: "
    '{"memories": [{"text": "...", "action": "add"}, {"text": "...", "action": "update", "id": "m1"}], '
    '"facts": [{"subject": "...", "predicate": "snake_case_verb", "object": {"entity": "..."}}]}; a '
    'fact\'s object that is a value is {"string": "..."}, {"number": n}, {"date": "YYYY-MM-DD"} or '
    '{"boolean": true}. Answer {"memories": [], "facts": []} when nothing is worth remembering.'
)

ACTIONS = ("add", "update", "noop")


@dataclass(frozen=True)
class ExtractedMemory:
    """A statement to remember: ``action`` add, update (``target``: the existing memory's prompt id
    it replaces) or noop (``target``: the memory that already says it)."""

    text: str
    action: str
    target: str | None = None


@dataclass(frozen=True)
class ExtractedFact:
    """A fact triple as the answer gave it (``obj`` in the API's wire form)."""

    subject: str
    predicate: str
    obj: dict[str, Any]


@dataclass(frozen=True)
class Extracted:
    memories: list[ExtractedMemory]
    facts: list[ExtractedFact]


class AnswerRefused(Exception):
    """The model's answer cannot be applied as a whole; ``args[0]`` says why (the job's error)."""


def prompt_user(transcript: Sequence[str], existing: Mapping[str, str]) -> str:
    """The user message of the prompt: the ``existing`` memories (prompt id -> text) and the new
    messages (``transcript``: one line each)."""
    known = [f"{key}: {text}" for key, text in existing.items()] or ["(none)"]
    return "EXISTING MEMORIES:\n" + "\n".join(known) + "\n\nNEW MESSAGES:\n" + "\n".join(transcript)


_FENCED = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def _document(answer: str) -> dict[str, Any]:
    """The answer's JSON object (a Markdown code fence around it is allowed). Raises
    ``AnswerRefused``."""
    if not answer.strip():
        raise AnswerRefused("empty answer")
    fenced = _FENCED.match(answer)
    try:
        document = json.loads(fenced.group(1) if fenced else answer)
    except ValueError:
        raise AnswerRefused("malformed answer: not JSON") from None
    if not isinstance(document, dict) or not set(document) <= {"memories", "facts"}:
        raise AnswerRefused('malformed answer: expected {"memories": [...], "facts": [...]}')
    for name in ("memories", "facts"):
        if not isinstance(document.get(name, []), list):
            raise AnswerRefused(f"malformed answer: {name} is not a list")
    return document


def _memory(item: Any, where: str, known: Collection[str]) -> ExtractedMemory:
    if not isinstance(item, dict) or not set(item) <= {"text", "action", "id"}:
        raise AnswerRefused(f"malformed answer: {where} is not {{text, action, id?}}")
    text, action, target = item.get("text"), item.get("action"), item.get("id")
    if not isinstance(text, str) or not text.strip() or "\x00" in text:
        raise AnswerRefused(f"malformed answer: {where}.text is not a text")
    if action not in ACTIONS:
        raise AnswerRefused(f"malformed answer: {where}.action is not one of {', '.join(ACTIONS)}")
    if action == "add":
        if target is not None:
            raise AnswerRefused(f"malformed answer: {where} adds and names an id")
        return ExtractedMemory(text.strip(), action)
    if target not in known:
        raise AnswerRefused(f"malformed answer: {where}.id names no existing memory shown")
    return ExtractedMemory(text.strip(), action, target)


def _fact(item: Any, where: str) -> ExtractedFact:
    if not isinstance(item, dict) or set(item) != {"subject", "predicate", "object"}:
        raise AnswerRefused(f"malformed answer: {where} is not {{subject, predicate, object}}")
    subject, predicate, obj = item["subject"], item["predicate"], item["object"]
    if not isinstance(subject, str) or not isinstance(predicate, str):
        raise AnswerRefused(f"malformed answer: {where} has a subject or predicate that is no text")
    try:
        FactObject.from_wire(obj)
    except DomainError as exc:
        raise AnswerRefused(f"malformed answer: {where}.object: {exc.message}") from None
    return ExtractedFact(subject, predicate, obj)


def answer_read(answer: str, *, known: Collection[str]) -> Extracted:
    """The items of ``answer`` (the model's text): memories and facts, each checked; ``known``: the
    prompt ids of the existing memories shown. Raises ``AnswerRefused`` (``"empty answer"``,
    ``"malformed answer: ..."`` naming the first bad item) unless every item is well formed."""
    document = _document(answer)
    memories = [_memory(item, f"memories[{i}]", known) for i, item in enumerate(document.get("memories", []))]
    facts = [_fact(item, f"facts[{i}]") for i, item in enumerate(document.get("facts", []))]
    return Extracted(memories, facts)
