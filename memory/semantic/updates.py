"""How a write relates to a memory an embedding puts near it: the same statement (a rewording, which
reinforces the memory), an update of it (the same statement about the same thing with a new value:
it supersedes the memory) or another statement (about someone or something else, or saying
something else: both stay current). ``relation`` decides; ``duplicates.dedup_plan`` applies it.

The two texts are aligned word by word (``difflib``), and each stretch where they differ is read:

- **neutral**: only function words, or the same content words in another order or inflection
  ("the rent for" / "rent for", "our packaging supplier" / "our supplier for packaging");
- **value**: a stretch where ``differences`` finds a changed negation, number, date, name, literal
  or opposite ("09:05" / "11:05", "is" / "is not", "likes" / "dislikes", "Carol Ng" / "Erik Sand"),
  or one word replacing another as the sentence's last word (its value slot: "by email" / "by
  phone", "status is shipped" / "delivered");
- **wording**: any other change of content words ("departs" / "leaves", "manager" / "dentist").

A value or wording stretch before the sentence's main verb changes **what the statement is
about** (its subject: "Alice works at Acme" / "Bob works at Acme", "Order 55231 has shipped" /
"Order 55232 ...", "The red suitcase" / "The blue suitcase"): another statement, never an update,
whatever the cosine (superseding it would hide live data). Otherwise, by the cosine ``c`` of the two
vectors and the tenant's ``near_duplicate_threshold`` ``t``:

| cosine | same statement | update |
|---|---|---|
| ``c >= t`` | nothing ``differences`` finds differs and no value stretch | anything else |
| ``t - WORDING_BAND <= c < t`` | no value stretch (a rewording may change words) | one value slot: one value stretch of at most ``VALUE_SLOT_WORDS`` words (rewording around it allowed) |
| ``UPDATE_FLOOR <= c < t - WORDING_BAND`` | only neutral stretches | one value slot and nothing else |

A text that asks what the other states (``differences``' question) is another statement at any
cosine. Anything else is another statement. The lower bands exist because a sentence embedding moves far
for a changed name or a negation ("Dana's manager is Carol Ng" / "... Erik Sand": 0.72 with
all-MiniLM-L6-v2, "The apartment allows pets" / "... does not allow pets": 0.76) and for plain
rewordings (0.89 - 0.97); the alignment, not the cosine, then decides. Measured on
``tests/fixtures/updates/pairs.jsonl`` by ``benchmarks/updates.py`` (decision 0072). English only;
the main verb is found by word shape (auxiliaries, modals, ``-s`` / ``-ed`` forms), so a sentence
opening with an adverbial ("On Sunday, ...") reads a change there as one of its subject.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass
from enum import StrEnum

from .differences import Difference, differences
from .near import UPDATE_FLOOR

# below ``near_duplicate_threshold``, an update restates the sentence with one value slot changed: a
# time, a price, a name, a negation ("does not allow"), at most this many words on either side; two
# sentences whose values differ in a longer stretch, or in two places, are two statements (two
# events of one kind: "Bart and his cousin went to the park" / "Bart and his dad went swimming"),
# both kept current
VALUE_SLOT_WORDS = 4

# below ``near_duplicate_threshold`` by up to this much, a rewording that changes words is still
# the same statement (cosines of plain rewordings reach down to about 0.89 with all-MiniLM-L6-v2)
WORDING_BAND = 0.08


class Relation(StrEnum):
    SAME = "same"
    UPDATE = "update"
    OTHER = "other"


_WORD = re.compile(
    r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+|[a-z][a-z0-9+.-]*://[^\s<>\"'`]+|(?<![\w/.])(?:~|\.{1,2})?/[\w.-]+(?:/[\w.-]*)*"
    r"|[$€£¥]?(?:-(?=\d))?\w+(?:[-'\u2019.:,/]\w+)*%?",
    re.I,
)
_FUNCTION = frozenset(
    """a an the this that these those there here it its it's i we you he she they me us him her them my our
    your his their in on at for from to with by of about after before during since until till as if
    because so but and or also then now is are was were be been being do does did has have had will would
    should could can may might must shall just only still already yet again anymore any more per via
    longer currently now's presently""".split()
)
_AUXILIARIES = frozenset(
    """is are was were be been has have had will would should could can may might must shall does do did
    isn't aren't wasn't weren't hasn't haven't hadn't won't wouldn't shouldn't couldn't can't cannot
    doesn't don't didn't mustn't""".split()
)
_NOT_VERB_BEFORE = frozenset(
    "a an the this that these those my our your his her their its of for to in on at".split()
)


_NEGATING = frozenset("not no never longer anymore cannot".split())
# irregular past forms that open a predicate ("came to", "went to", "left at")
_IRREGULAR = frozenset(
    """came went got took made left said ran gave found bought sold paid met told became began brought
    kept held lost sent spent won wrote drove flew rode chose""".split()
)


@functools.lru_cache(maxsize=4096)
def _tokens(text: str) -> tuple[str, ...]:
    """The words of ``text`` as written (an e-mail address, URL or path is one word)."""
    return tuple(w.replace("\u2019", "'").rstrip(".,;:") for w in _WORD.findall(text))


def _fold(words: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(w.casefold() for w in words)


def _stem(word: str) -> str:
    word = word.removesuffix("'s")
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _verb_at(words: tuple[str, ...]) -> int:
    """The index of the sentence's main verb, by word shape; 1 when none is found (the first word
    is then read as the subject)."""
    for i, word in enumerate(words):
        if word in _AUXILIARIES or word in _IRREGULAR or word.endswith("n't"):
            return i
        if i == 0 or words[i - 1] in _NOT_VERB_BEFORE or any(c.isdigit() for c in word):
            continue
        if word.endswith(("ed", "es")) or (word.endswith("s") and not word.endswith(("ss", "us", "'s"))):
            return i
    return 1


def _content(words: list[str]) -> list[str]:
    return sorted(_stem(w) for w in words if w not in _FUNCTION)


@functools.lru_cache(maxsize=8192)
def _differ(a: str, b: str) -> bool:
    """Whether ``differences`` finds anything between two stretches (short, often repeated)."""
    return bool(differences(a, b))


@dataclass(frozen=True)
class _Reading:
    """What the aligned texts' differing stretches say: whether one changes what the statement is
    about (``subject``), whether any is a ``value`` or a ``wording`` stretch, how many are value
    stretches (``count``) and the most words one of those spans on either side (``longest``)."""

    subject: bool = False
    value: bool = False
    wording: bool = False
    count: int = 0
    longest: int = 0

    def one_value_slot(self) -> bool:
        """Whether the texts differ in one short value stretch (at most ``VALUE_SLOT_WORDS`` words a
        side); wording stretches are judged apart, by the cosine band."""
        return self.count == 1 and self.longest <= VALUE_SLOT_WORDS


def _stretches(new: str, old: str) -> _Reading:
    """How the aligned texts differ (``_Reading``)."""
    raw_a, raw_b = _tokens(old), _tokens(new)
    a, b = _fold(raw_a), _fold(raw_b)
    changed = bool(differences(new, old))  # a value moved elsewhere in the sentence is no change
    if not changed and _content(list(a)) == _content(list(b)):
        return _Reading()  # the same content words: another order or inflection
    verb_a, verb_b = _verb_at(a), _verb_at(b)
    subject = value = wording = False
    count = longest = 0
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        is_value = changed and _differ(" ".join(raw_b[j1:j2]), " ".join(raw_a[i1:i2]))
        if not is_value and _content(list(a[i1:i2])) == _content(list(b[j1:j2])):
            continue
        swapped = tag == "replace" and i2 - i1 == j2 - j1 == 1
        # the sentence's last word swapped for another word is its value slot ("by email" / "by phone")
        if swapped and i2 == len(a) and j2 == len(b) and not any(c.isdigit() for c in a[i1] + b[j1]):
            is_value = True
        value |= is_value
        wording |= not is_value
        if is_value:
            count, longest = count + 1, max(longest, i2 - i1, j2 - j1)
        # what the statement is about changed: a value, or one word swapped for another, before the verb
        named = any(w not in _FUNCTION and w not in _NEGATING for w in a[i1:i2] + b[j1:j2])
        if (i1 < verb_a or j1 < verb_b) and named and (is_value or swapped):
            subject = True
    return _Reading(subject, value, wording, count, longest)


@functools.lru_cache(maxsize=8192)
def relation(new: str, old: str, *, similarity: float, threshold: float) -> Relation:
    """How the text ``new`` relates to ``old`` whose vectors have cosine ``similarity``, under the
    tenant's ``near_duplicate_threshold`` ``threshold`` (the table of the module's docstring).
    Cached: a write asks it of the same candidate for a duplicate and for an update."""
    if similarity < min(UPDATE_FLOOR, threshold):
        return Relation.OTHER
    if Difference.QUESTION in differences(new, old):
        return Relation.OTHER  # asking is neither the statement nor an update of it: both stay
    if similarity < threshold - WORDING_BAND:
        # the strict band wants the sentences alike but for values: half of the shorter one's words
        # in common, checked before any alignment (most near pairs of a batch fail it)
        a, b = set(_fold(_tokens(old))), set(_fold(_tokens(new)))
        if 2 * len(a & b) < min(len(a), len(b)):
            return Relation.OTHER
    read = _stretches(new, old)
    if not (read.value or read.wording):
        return Relation.SAME
    if read.subject:
        return Relation.OTHER
    if similarity >= threshold:
        return Relation.UPDATE if read.value or differences(new, old) else Relation.SAME
    if similarity >= threshold - WORDING_BAND:
        if not read.value:
            return Relation.SAME
        return Relation.UPDATE if read.one_value_slot() else Relation.OTHER
    return Relation.UPDATE if read.value and not read.wording and read.one_value_slot() else Relation.OTHER
