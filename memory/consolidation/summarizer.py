"""The deterministic extractive summarizer of the episodic summary tree (no model, no network).

A leaf (level 1) keeps, from its events in order:

- every ``decision`` event: ``- decision: <content>``;
- every tool call and every tool result: ``- tool call: <content> <payload>``, ``- result: <content>``;
- every sentence stating a constraint (``must``, ``never``, ``only``, ``at most``, ``at least``,
  ``deadline``, ``due``, ``required``, ``do not``...): ``- constraint: <sentence>``;
- from every other message, its most informative sentence (the one naming the most entities,
  numbers and dates), when it names any: ``- <role or speaker>: <sentence>``;
- the named entities, and the numbers and dates, of all its events that the lines above do not
  already hold: ``Entities: …`` and ``Numbers and dates: …``.

A summary of summaries keeps every decision, tool call, result and constraint line of its children
(in order, each once) and the union of their entities and numbers; the message gists stay in the
leaves. So every decision and constraint of a session reaches its root. Named entities are found
by capitalisation (a word starting with a capital letter that does not open a sentence, or one
that is not a common sentence opener), which is what an extractive summarizer without a tagger
can do; numbers and dates by pattern.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

CONSTRAINT = re.compile(
    r"\b(must|mustn't|never|only|at most|at least|no more than|no later than|not more than|deadline|"
    r"due (?:by|on|at)|required|requires?|mandatory|forbidden|not allowed|do not|don't|cannot|can't|"
    r"should not|shouldn't|always|limit(?:ed)? to|until|before)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
APOSTROPHES = "'\u2019"
_WORD_CAP = re.compile(
    rf"\b[A-Z][\w{APOSTROPHES}&-]*(?:\s+(?:of|de|da|do|van|von|der|la|le|the|and|&)?\s*"
    rf"[A-Z][\w{APOSTROPHES}&-]*)*"
)
MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December|"
    "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)
WEEKDAYS = "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
_DATE = re.compile(
    rf"\b(?:\d{{4}}-\d{{2}}-\d{{2}}(?:[T ][\d:.]+Z?)?|\d{{1,2}}/\d{{1,2}}/\d{{2,4}}|"
    rf"(?:{MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{MONTHS})"
    rf"(?:,?\s+\d{{4}})?|(?:{MONTHS})\s+\d{{4}}|(?:{WEEKDAYS})|(?:yesterday|today|tomorrow|tonight)|"
    rf"(?:last|next|this)\s+(?:week|weekend|month|year|{WEEKDAYS}))\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"(?<![\w.])[$€£]?\d[\d,]*(?:\.\d+)?(?:\s?(?:%|[kKmM]\b|am\b|pm\b|h\b|km\b|kg\b))?")
_NUMBER_WORDS = re.compile(
    r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|"
    r"hundred|thousand|million|billion|dozen|half)\b",
    re.IGNORECASE,
)
# Capitalised at a sentence start without being names
OPENERS = frozenset(
    """a an the i i'm i've i'd i'll we we're it it's its this that these those there here he she they you
    your my our his her their yes no yeah yep nope hi hey hello thanks thank wow oh ok okay so but and or
    if when what why how who where which well sure great good nice cool awesome really just also then
    now please sorry let let's can could would should will do does did is are was were be been have has had
    not maybe perhaps actually anyway btw haha lol omg congrats congratulations that's what's it'll
    you're they're we've you've sounds sound glad love loved wait hmm um uh aw aww right true totally
    definitely absolutely exactly honestly agreed indeed anyway anyhow besides still though although
    also plus first second third finally next last after before since because while once thanks
    cheers bye goodbye welcome nothing something everything anything someone everyone nobody none
    some many most all both each every few more much other another such same own very quite pretty
    understood noted done got gotcha lots hope wish happy sad fun amazing wonderful fantastic
    interesting incredible beautiful lovely sweet""".split()
)
PARENT_KINDS = ("- decision:", "- tool call:", "- result:", "- constraint:")
MAX_LINE_CHARS = 500
MAX_GIST_CHARS = 240


@dataclass(frozen=True)
class SourceEvent:
    """What the summarizer reads of one event (``speaker`` names who spoke, e.g. the agent)."""

    seq: int
    kind: str
    role: str
    content: str
    payload: dict[str, Any]
    speaker: str = ""


def estimate_tokens(text: str) -> int:
    """About four characters a token (OpenAI's rule of thumb for English), at least 1."""
    return max(1, len(text) // 4)


def sentences(text: str) -> list[str]:
    """``text`` split into sentences (after ``.``, ``!`` or ``?`` and a space, or at a line break)."""
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def entities(text: str) -> list[str]:
    """Named entities of ``text`` by capitalisation, in order, each once (see the module)."""
    found: list[str] = []
    for sentence in sentences(text):
        for match in _WORD_CAP.finditer(sentence):
            name = match.group(0).strip(f" {APOSTROPHES}-&")
            words = name.split()
            while words and (words[0].lower().strip(APOSTROPHES) in OPENERS or _DATE.fullmatch(words[0])):
                words = words[1:]
            while words and words[-1].lower() in (
                "of",
                "de",
                "da",
                "do",
                "van",
                "von",
                "der",
                "la",
                "le",
                "the",
                "and",
            ):
                words = words[:-1]
            name = " ".join(words)
            if len(name) < 2 or name.lower() in OPENERS or _DATE.fullmatch(name):
                continue
            if name not in found:
                found.append(name)
    return found


def numbers_and_dates(text: str) -> list[str]:
    """Dates, then numbers (digits, with a currency or unit, and number words) in ``text``, each once."""
    found: list[str] = []
    for pattern in (_DATE, _NUMBER, _NUMBER_WORDS):
        for match in pattern.finditer(text):
            token = match.group(0).strip()
            if token and not any(token in f for f in found):
                found.append(token)
    return found


def _salience(sentence: str) -> int:
    return len(entities(sentence)) + 2 * len(numbers_and_dates(sentence))


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _payload_text(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":")) if payload else ""


def event_lines(event: SourceEvent) -> list[str]:
    """The lines a leaf keeps of one event (see the module); may be empty."""
    content = event.content.strip()
    if event.kind == "decision":
        return [f"- decision: {_cut(content, MAX_LINE_CHARS)}"]
    if event.kind == "tool_call":
        return [
            f"- tool call: {_cut((content + ' ' + _payload_text(event.payload)).strip(), MAX_LINE_CHARS)}"
        ]
    if event.kind == "tool_result":
        return [f"- result: {_cut((content or _payload_text(event.payload)), MAX_LINE_CHARS)}"]
    lines: list[str] = []
    rest: list[str] = []
    for sentence in sentences(content):
        if CONSTRAINT.search(sentence):
            lines.append(f"- constraint: {_cut(sentence, MAX_LINE_CHARS)}")
        else:
            rest.append(sentence)
    if rest:
        best = max(rest, key=_salience)  # max keeps the first of equals: deterministic
        if _salience(best) > 0:
            who = event.speaker or event.role
            lines.append(f"- {who}: {_cut(best, MAX_GIST_CHARS)}")
    return lines


def _tail(kept: str, names: Iterable[str], numbers: Iterable[str]) -> list[str]:
    """``Entities:`` / ``Numbers and dates:`` lines for what ``kept`` does not hold yet."""
    lines = []
    missing = [n for n in names if n not in kept]
    if missing:
        lines.append("Entities: " + ", ".join(missing))
    missing_numbers = [n for n in numbers if n not in kept]
    if missing_numbers:
        lines.append("Numbers and dates: " + ", ".join(missing_numbers))
    return lines


def header(session_id: str, level: int, first_seq: int, last_seq: int, count: int) -> str:
    """The first line of every summary: what it covers (so no two nodes share a text)."""
    kind = "events" if level == 1 else f"level-{level - 1} summaries"
    return f"Summary of session {session_id}, events #{first_seq}\u2013#{last_seq} ({count} events; over {kind}):"


def summarize_events(events: Sequence[SourceEvent]) -> list[str]:
    """The body lines of a leaf over ``events`` (in seq order), without its header."""
    body: list[str] = []
    names: list[str] = []
    numbers: list[str] = []
    for event in events:
        body.extend(event_lines(event))
        text = event.content + (" " + _payload_text(event.payload) if event.kind != "message" else "")
        names.extend(n for n in entities(text) if n not in names)
        numbers.extend(n for n in numbers_and_dates(event.content) if n not in numbers)
    kept = "\n".join(body)
    return body + _tail(kept, names, numbers)


def _listed(line: str, prefix: str) -> list[str]:
    return [item.strip() for item in line[len(prefix) :].split(", ") if item.strip()]


def summarize_summaries(children: Sequence[str]) -> list[str]:
    """The body lines of a summary of the summaries ``children`` (their full texts, in order):
    their decision, tool, result and constraint lines, each once, and the union of their entities
    and numbers that those lines do not hold."""
    body: list[str] = []
    seen: set[str] = set()
    names: list[str] = []
    numbers: list[str] = []
    for child in children:
        for line in child.splitlines():
            if line.startswith(PARENT_KINDS):
                if line not in seen:
                    seen.add(line)
                    body.append(line)
            elif line.startswith("Entities: "):
                names.extend(n for n in _listed(line, "Entities: ") if n not in names)
            elif line.startswith("Numbers and dates: "):
                numbers.extend(n for n in _listed(line, "Numbers and dates: ") if n not in numbers)
            elif line.startswith("- "):  # a gist: its entities and numbers go up, the sentence stays
                gist = line.split(": ", 1)[-1]
                names.extend(n for n in entities(gist) if n not in names)
                numbers.extend(n for n in numbers_and_dates(gist) if n not in numbers)
    kept = "\n".join(body)
    return body + _tail(kept, names, numbers)
