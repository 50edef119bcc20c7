"""What a near duplicate may not change: whether two texts an embedding puts close together say the
same thing (a write that rewords a memory reinforces it) or not (a write that differs in what
matters is an update: stored as a memory of its own, never merged).

Sentence embeddings place a statement and its negation, or two statements that differ in a number,
a date or a name, within a cosine of 0.93-0.99 of each other (all-MiniLM-L6-v2: "... runs every
night at 2am UTC" / "... at 3am UTC" 0.98, "... has 16 GB of RAM and four cores" / "32 GB" 0.99;
the static model2vec one: "Patient X is allergic to penicillin" / "... is not allergic ..." 0.99),
so a threshold on the cosine cannot tell a rewording from an update. ``differences`` compares the
two texts token by token (no model, no LLM; English) and names what differs; an empty answer means
nothing that matters does.

What is compared (``features`` computes it once per text):

- **negation**: how many negations each text holds: ``not``, ``no``, ``never``, ``nothing``,
  ``nobody``, ``none``, ``neither``, ``nor``, ``nowhere``, ``cannot``, ``without``, every ``n't``
  contraction (``isn't``, ``won't``, ``can't``, with a curly apostrophe too, or none: ``doesnt``), ``no
  longer``, ``no one``, a ``non-`` prefix; and, counted apart, the weak ones (``hardly``,
  ``barely``, ``scarcely``, ``rarely``, ``seldom``). "Never" and "does not" are one negation each,
  so they reword each other; "not only" is no negation.
- **number**: every quantity, as its value and unit: digits (``5,000`` = ``5000``, ``4.50`` =
  ``4.5``, ``-18``, ``3rd`` = ``3``, ``9:00`` = ``9``), number words (``twenty-one`` = ``21``,
  ``two hundred and five``, ``third`` = ``3``, ``a dozen``, ``twice``), scales (``3 million``,
  ``10k``) and the unit written on or after it (``2am`` / ``2 pm``, ``16 GB`` / ``16 TB``, ``10%``,
  ``$5`` = ``5 dollars``, ``35 days``). The two texts' quantities must be the same multiset: a
  quantity only one text has (``"at 9"`` against nothing) is a difference too, since merging
  would drop it.
- **date**: weekdays, months, years (a four-digit number from 1900 to 2099), ``today``,
  ``tomorrow``, ``yesterday``, ``tonight``, ``weekend``, parts of the day (``morning``, ``noon``, ...),
  seasons, periods and their adverbs (``day``/``daily``, ``week``/``weekly``, ...), and a period
  with ``next`` / ``last`` / ``this`` / ``coming`` / ``previous`` before it (``next week`` is not
  ``this week``). "May" and "March" are months only when capitalised or beside a number
  (otherwise a verb), and the abbreviations (``Jan``, ``Sun``, ...) only when capitalised.
- **name**: a word with a capital letter (``Alice``, ``AWS``, ``ThinkPad``, ``X``) that is no
  negation, number or date word, and not a common word opening a sentence ("The", "We", "After",
  ...): a name one text has and the other does not contain at all, in any case, is a difference
  (so "Alice works at Acme" / "Bob works at Acme" differ, while "the Design Team" / "the design
  team" do not).
- **literal**: what must match character for character (case aside): e-mail addresses, URLs, file
  paths, identifiers with ``_`` or a dot between words (``retry_limit``, ``config.yaml``), and text
  in double quotes or backticks.
- **question**: whether each text asks something (a sentence ending in ``?``, maybe followed by
  ``!``, ``?`` or a closing quote or bracket: "Really?!") and whether it states something (a
  sentence that does not; text in brackets is neither): "Does Alice live in Paris?" asks what
  "Alice lives in Paris." states, and "Did Alice pay? She did." answers what "Did Alice pay?" only
  asks. Sentences end as ``memory_lexical_weights`` ends them (white space after ``.``, ``!`` or
  ``?``, or after one of them and a closing quote or bracket); a ``?`` inside a URL is no question.
- **opposite**: a word one text has where the other has its opposite: a negating prefix
  (``available`` / ``unavailable``, ``likes`` / ``dislikes``, ``valid`` / ``invalid``) or a pair of
  a short table (``before`` / ``after``, ``enabled`` / ``disabled``, ``passed`` / ``failed``,
  ``allowed`` / ``forbidden``, ``always`` / ``sometimes``, ``every`` / ``some``, ...).

The comparison leans one way on purpose: a false "differs" stores a rewording as a memory of its own
(what a write did before near duplicates were merged, and recall ranks the two together), while a
false "same" loses what the caller said. Texts that are exact duplicates (the same ``normalise_text``)
never differ. Not covered: two names or numbers that swap places ("Alice pays Bob" / "Bob pays
Alice"), a name written in lower case, antonyms outside the table, modality ("may move" / "will
move"), other languages than English.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import StrEnum


class Difference(StrEnum):
    """A kind of difference that makes a near duplicate an update (see the module's docstring)."""

    NEGATION = "negation"
    NUMBER = "number"
    DATE = "date"
    NAME = "name"
    LITERAL = "literal"
    OPPOSITE = "opposite"
    QUESTION = "question"


@dataclass(frozen=True)
class Features:
    """What ``differences`` compares of one text.

    ``negations``: (strong, weak) negation counts; ``numbers``: the multiset of (value, unit);
    ``dates``: canonical dates (``"monday"``, ``"2026"``, ``"next week"``); ``soft_dates``:
    dates read from ambiguous words (``may``, ``Sun``), by the word's casefolded form, each a
    difference only when the other text lacks that word; ``names``: casefolded names;
    ``literals``; ``words``: every word, casefolded (possessive ``'s`` removed; a hyphenated word
    also joined and in parts); ``mood``: (whether it asks, whether it states)."""

    negations: tuple[int, int]
    numbers: Counter[tuple[str, str]]
    dates: frozenset[str]
    soft_dates: frozenset[tuple[str, str]]
    names: frozenset[str]
    literals: frozenset[str]
    words: frozenset[str]
    mood: tuple[bool, bool]


def differences(a: str, b: str) -> frozenset[Difference]:
    """What differs between ``a`` and ``b`` among the kinds of ``Difference``; empty when nothing
    that matters does (``b`` rewords ``a``). Symmetric; never raises for any text."""
    fa, fb = features(a), features(b)
    found: set[Difference] = set()
    if fa.negations != fb.negations:
        found.add(Difference.NEGATION)
    if fa.numbers != fb.numbers:
        found.add(Difference.NUMBER)
    if fa.dates != fb.dates or _soft_differ(fa, fb) or _soft_differ(fb, fa):
        found.add(Difference.DATE)
    if any(n not in fb.words for n in fa.names) or any(n not in fa.words for n in fb.names):
        found.add(Difference.NAME)
    if fa.literals != fb.literals:
        found.add(Difference.LITERAL)
    if _opposed(fa.words - fb.words, fb.words - fa.words):
        found.add(Difference.OPPOSITE)
    if fa.mood != fb.mood and any(fa.mood) and any(fb.mood):  # a stretch of no words neither asks nor states
        found.add(Difference.QUESTION)
    return frozenset(found)


def _soft_differ(fa: Features, fb: Features) -> bool:
    hard_b = fb.dates | {d for d, _ in fb.soft_dates}
    return any(d not in hard_b and word not in fb.words for d, word in fa.soft_dates)


# --- vocabulary ---------------------------------------------------------------------------------

_NEGATIONS = frozenset(
    "not no never nothing nobody none neither nor nowhere cannot without noone non".split()
)
# contractions written without their apostrophe (informal text); "wont" and "cant" too, though words
_NT_WORDS = frozenset(
    "isnt arent wasnt werent dont doesnt didnt hasnt havent hadnt wont wouldnt shouldnt couldnt cant "
    "mustnt neednt aint shant mightnt".split()
)
_WEAK_NEGATIONS = frozenset("hardly barely scarcely rarely seldom".split())

_SMALL = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {
    w: 10 * i
    for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split())
    if i > 1
}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_ORDINALS = {
    "first": "one",
    "second": "two",
    "third": "three",
    "fifth": "five",
    "eighth": "eight",
    "ninth": "nine",
    "twelfth": "twelve",
}
_VAGUE = frozenset("dozens hundreds thousands millions billions".split())
_TIMES = {"twice": 2, "thrice": 3}
_SUFFIX_SCALES = {"k": 1000, "bn": 10**9}

_UNITS = {
    **dict.fromkeys(["am", "a.m"], "am"),
    **dict.fromkeys(["pm", "p.m"], "pm"),
    **dict.fromkeys(["%", "percent", "pct"], "%"),
    **dict.fromkeys(["$", "dollar", "dollars", "usd"], "usd"),
    **dict.fromkeys(["€", "euro", "euros", "eur"], "eur"),
    **dict.fromkeys(["£", "pound", "pounds", "gbp", "quid"], "gbp"),
    **dict.fromkeys(["¥", "yen", "jpy"], "jpy"),
    **dict.fromkeys(["b", "byte", "bytes"], "b"),
    **{
        u: u
        for u in ["kb", "mb", "gb", "tb", "pb", "kib", "mib", "gib", "tib", "ghz", "mhz", "hz", "kw", "w"]
    },
    **dict.fromkeys(["ms", "millisecond", "milliseconds"], "ms"),
    **dict.fromkeys(["s", "sec", "secs", "second", "seconds"], "s"),
    **dict.fromkeys(["min", "mins", "minute", "minutes"], "min"),
    **dict.fromkeys(["h", "hr", "hrs", "hour", "hours"], "h"),
    **dict.fromkeys(["d", "day", "days"], "day"),
    **dict.fromkeys(["night", "nights"], "night"),
    **dict.fromkeys(["wk", "wks", "week", "weeks"], "week"),
    **dict.fromkeys(["mo", "month", "months"], "month"),
    **dict.fromkeys(["y", "yr", "yrs", "year", "years"], "year"),
    **dict.fromkeys(["mm", "millimeter", "millimeters", "millimetre", "millimetres"], "mm"),
    **dict.fromkeys(["cm", "centimeter", "centimeters", "centimetre", "centimetres"], "cm"),
    **dict.fromkeys(["m", "meter", "meters", "metre", "metres"], "m"),
    **dict.fromkeys(["km", "kilometer", "kilometers", "kilometre", "kilometres"], "km"),
    **dict.fromkeys(["mi", "mile", "miles"], "mi"),
    **dict.fromkeys(["ft", "foot", "feet"], "ft"),
    **dict.fromkeys(["inch", "inches"], "inch"),
    **dict.fromkeys(["mg", "milligram", "milligrams"], "mg"),
    **dict.fromkeys(["g", "gram", "grams"], "g"),
    **dict.fromkeys(["kg", "kilo", "kilos", "kilogram", "kilograms"], "kg"),
    **dict.fromkeys(["lb", "lbs"], "lb"),
    **dict.fromkeys(["oz", "ounce", "ounces"], "oz"),
    **dict.fromkeys(["l", "liter", "liters", "litre", "litres"], "l"),
    **dict.fromkeys(["ml", "milliliter", "milliliters", "millilitre", "millilitres"], "ml"),
    **dict.fromkeys(["degree", "degrees", "°"], "degree"),
    **dict.fromkeys(["°c", "celsius"], "°c"),
    **dict.fromkeys(["°f", "fahrenheit"], "°f"),
    **dict.fromkeys(["x", "times", "time"], "times"),
    **dict.fromkeys(["o'clock", "oclock"], ""),
}
_ORDINAL_SUFFIXES = frozenset({"st", "nd", "rd", "th"})

_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_MONTHS = "january february march april may june july august september october november december".split()
_DATE_WORDS = {
    **{d: d for d in _WEEKDAYS},
    **{d + "s": d for d in _WEEKDAYS},
    **{m: m for m in _MONTHS if m not in ("may", "march")},
    **dict.fromkeys(["today", "tomorrow", "yesterday", "tonight"], None),
    **dict.fromkeys(["weekend", "weekends"], "weekend"),
    **dict.fromkeys(["weekday", "weekdays"], "weekday"),
    **dict.fromkeys(["morning", "mornings"], "morning"),
    **dict.fromkeys(["afternoon", "afternoons"], "afternoon"),
    **dict.fromkeys(["evening", "evenings"], "evening"),
    **dict.fromkeys(["night", "nights", "nightly", "overnight"], "night"),
    **dict.fromkeys(["noon", "midday"], "noon"),
    "midnight": "midnight",
    **dict.fromkeys(["spring", "summer", "autumn", "winter"], None),
    **dict.fromkeys(["hour", "hours", "hourly"], "hour"),
    **dict.fromkeys(["day", "days", "daily"], "day"),
    **dict.fromkeys(["week", "weeks", "weekly"], "week"),
    **dict.fromkeys(["fortnight", "fortnights", "fortnightly", "biweekly"], "fortnight"),
    **dict.fromkeys(["month", "months", "monthly"], "month"),
    **dict.fromkeys(["quarter", "quarters", "quarterly"], "quarter"),
    **dict.fromkeys(["year", "years", "yearly", "annual", "annually"], "year"),
    **dict.fromkeys(["decade", "decades"], "decade"),
}
# words that are dates only when capitalised (or, for months, beside a number): verbs, names, nouns
_AMBIGUOUS_DATES = {
    "may": "may",
    "march": "march",
    **{a: m for m in _MONTHS for a in (m[:3],) if m not in ("may",)},
    "sept": "september",
    **{a: d for d in _WEEKDAYS for a in (d[:3],)},
    "tues": "tuesday",
    "thur": "thursday",
    "thurs": "thursday",
}
_DATE_MODIFIERS = frozenset("next last this coming previous".split())

# common words that open a sentence with a capital letter and are no name
_FUNCTION_WORDS = frozenset(
    """a an the this that these those there here it its it's i i'm i've i'll i'd we you he she they me us
    him her them my our your his their what when where which who whom whose why how in on at for from to
    with by of about after before during since until till as if because so but and or also then now yes
    ok okay hi hey hello thanks thank please every each all some any both many most more few several
    other another such is are was were be been being do does did has have had will would should could can
    might must shall let let's just only maybe perhaps still already yet again always usually often
    sometimes over under into through while although though however therefore meanwhile besides instead
    otherwise once well oh wow sure very really actually anyway note remember apparently also per via
    according our everyone everybody everything someone somebody something anyone anybody anything""".split()
)

_OPPOSITE_PAIRS: list[tuple[str, str]] = [
    ("before", "after"),
    ("more most", "less least fewer fewest"),
    (
        "increase increases increased increasing rise rises rose risen grow grows grew grown",
        "decrease decreases decreased decreasing fall falls fell fallen drop drops dropped shrink shrinks shrank",
    ),
    ("higher highest high", "lower lowest low"),
    ("above", "below"),
    ("up", "down"),
    ("inside", "outside"),
    ("true", "false"),
    (
        "allow allows allowed permit permits permitted",
        "deny denies denied forbid forbids forbidden prohibit prohibits prohibited ban bans banned",
    ),
    (
        "accept accepts accepted approve approves approved",
        "reject rejects rejected decline declines declined",
    ),
    (
        "pass passes passed succeed succeeds succeeded success successful successfully",
        "fail fails failed failure",
    ),
    ("win wins won winning winner", "lose loses lost losing loser"),
    ("open opens opened", "close closes closed shut"),
    ("enable enables enabled on", "disable disables disabled off"),
    ("include includes included including", "exclude excludes excluded excluding"),
    ("add adds added", "remove removes removed delete deletes deleted"),
    (
        "start starts started begin begins began begun",
        "stop stops stopped end ends ended finish finishes finished",
    ),
    (
        "like likes liked love loves loved enjoy enjoys enjoyed prefer prefers preferred",
        "hate hates hated detest detests detested",
    ),
    ("buy buys bought purchase purchased", "sell sells sold"),
    ("arrive arrives arrived arrival", "leave leaves left depart departs departed departure"),
    ("early earlier earliest", "late later latest"),
    ("minimum min", "maximum max"),
    ("always", "sometimes occasionally usually often"),
    (
        "all every each everyone everybody everything",
        "some someone somebody something several",
    ),
    ("online", "offline"),
    ("public", "private"),
    ("internal", "external"),
    ("inbound incoming", "outbound outgoing"),
    ("import imports imported", "export exports exported"),
    ("input inputs", "output outputs"),
    ("positive", "negative"),
    ("present", "absent"),
    ("alive", "dead"),
    ("male man men boy boys", "female woman women girl girls"),
    ("north northern", "south southern"),
    ("east eastern", "west western"),
    ("good better best great excellent", "bad worse worst poor terrible"),
    ("hot warm warmer", "cold cool colder"),
    ("cheap cheaper cheapest", "expensive"),
    ("fast faster fastest quick quickly", "slow slower slowest slowly"),
    ("big bigger biggest large larger largest", "small smaller smallest little"),
    ("long longer longest", "short shorter shortest"),
    ("new newer newest", "old older oldest"),
    ("easy easier easiest", "hard harder hardest difficult"),
    ("right correct", "wrong"),
    ("married", "single divorced"),
    ("required mandatory", "optional"),
    ("same", "different"),
    ("safe", "dangerous"),
]
_OPPOSITES: dict[str, set[str]] = {}
for _left, _right in _OPPOSITE_PAIRS:
    for _w in _left.split():
        _OPPOSITES.setdefault(_w, set()).update(_right.split())
    for _w in _right.split():
        _OPPOSITES.setdefault(_w, set()).update(_left.split())
# a prefix that negates what follows: "unavailable", "dislikes", "invalid", "nonexistent"
_NEGATING_PREFIXES = ("un", "in", "im", "il", "ir", "dis", "non")


def _opposed(only_a: frozenset[str], only_b: frozenset[str]) -> bool:
    """Whether a word only ``a`` has and a word only ``b`` has are opposites."""
    for x, y in ((only_a, only_b), (only_b, only_a)):
        for word in x:
            if _OPPOSITES.get(word, set()) & y:
                return True
            if len(word) >= 4 and any(p + word in y for p in _NEGATING_PREFIXES):
                return True
    return False


# --- reading a text -----------------------------------------------------------------------------

_QUOTES = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u02bc": "'", "\u201c": '"', "\u201d": '"', "\u2212": "-"}
)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s<>\"'`]+", re.I)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PATH = re.compile(r"(?<![\w/.])(?:~|\.{1,2})?/[\w.-]+(?:/[\w.-]*)*")
_IDENTIFIER = re.compile(r"\b(?:\w*[^\W\d]\w*_\w+|\w+(?:\.[^\W\d_]\w+)+)\b")
_QUOTED = re.compile(r'"([^"\n]{1,200})"|`([^`\n]{1,200})`')
_TRAILING = ".,;:!?)]}'\""
_TOKEN = re.compile(
    r"(?P<num>(?:(?<![\w-])-)?\d+(?:[.,:/]\d+)*)(?P<suffix>[^\W\d_]+|%|°[^\W\d_]?)?"
    r"|(?P<word>[^\W\d_]+(?:'[^\W\d_]+)*)"
    r"|(?P<sym>[$€£¥%°])"
)
_SENTENCE_BREAK = frozenset(".!?;:\n•*")
_I = frozenset(("i", "i'm", "i've", "i'll", "i'd"))  # capitalised, yet no name


@dataclass
class _Token:
    kind: str  # "num", "word" or "sym"
    text: str  # as written
    lower: str  # casefolded, possessive removed (words)
    suffix: str  # letters written on a number ("am", "gb", "rd"), casefolded
    opens_sentence: bool
    joined: bool  # written against the previous token with a hyphen ("twenty-one", "Wi-Fi")
    after_space: bool


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    end = 0
    for match in _TOKEN.finditer(text):
        gap = text[end : match.start()]
        opens = not out or any(c in _SENTENCE_BREAK for c in gap)
        kind = "num" if match.lastgroup == "suffix" else str(match.lastgroup)
        raw = match.group("num") if match.group("num") is not None else match.group(0)
        lower = raw.casefold()
        if kind == "word":
            if lower.endswith("'s"):
                lower = lower[:-2]
            elif lower.endswith("'"):
                lower = lower[:-1]
        suffix = (match.group("suffix") or "").casefold() if kind == "num" else ""
        out.append(_Token(kind, raw, lower, suffix, opens, gap == "-", bool(gap) and gap.isspace()))
        end = match.end()
    return out


def _canonical_number(raw: str) -> Decimal | str:
    """``raw`` digits as a value: thousands separators dropped, ``:00`` of a full hour dropped;
    forms that are no single value (``1.2.3``, ``12/15/2026``, ``9:30``) as written."""
    if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", raw):
        raw = raw.replace(",", "")
    if re.fullmatch(r"\d{1,2}:00", raw):
        raw = raw[:-3]
    if re.fullmatch(r"-?\d+(?:\.\d+)?", raw):
        try:
            return Decimal(raw)
        except InvalidOperation:  # pragma: no cover - the pattern admits only valid decimals
            return raw
    return raw


def _number_text(value: Decimal | str) -> str:
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")
    return value


def _word_number(word: str) -> int | None:
    """The value of one number word (``seven``, ``twenty``, ``third``, ``fortieth``), else None."""
    word = _ORDINALS.get(word, word)
    if word in _SMALL:
        return _SMALL[word]
    if word in _TENS:
        return _TENS[word]
    if word.endswith("ieth") and word[:-4] + "y" in _TENS:
        return _TENS[word[:-4] + "y"]
    if word.endswith("th") and word not in ("th",):
        base = word[:-2]
        for candidate in (base, base + "e", base + "t"):
            if candidate in _SMALL and _SMALL[candidate] > 3:
                return _SMALL[candidate]
        if base in _SCALES:
            return _SCALES[base]
    return None


def _is_number_word(word: str) -> bool:
    return _word_number(word) is not None or word in _SCALES or word == "dozen"


def _unit(token: _Token | None) -> str | None:
    if token is None:
        return None
    if token.kind == "sym":
        return _UNITS.get(token.text)
    if token.kind == "word":
        return _UNITS.get(token.lower)
    return None


def _date_word(token: _Token, neighbours: tuple[_Token | None, _Token | None]) -> tuple[str, bool] | None:
    """The date ``token`` names, and whether it is soft (read from an ambiguous word)."""
    lower = token.lower
    if lower in _DATE_WORDS:
        return _DATE_WORDS[lower] or lower, False
    if lower in _AMBIGUOUS_DATES:
        titled = (token.text[:1].isupper() and token.text[1:].islower()) or token.text.isupper()
        beside_number = lower in ("may", "march") and any(
            n is not None and n.kind == "num" for n in neighbours
        )
        if titled or beside_number:
            return _AMBIGUOUS_DATES[lower], True
    return None


@functools.lru_cache(maxsize=4096)
def features(text: str) -> Features:
    """What ``differences`` compares of ``text`` (cached per text: a write meets several candidates)."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    text, literals = _literals(text)
    reading = _Reading(_tokens(text))
    reading.read()
    reading.read_names()
    return Features(
        negations=(reading.strong, reading.weak),
        numbers=reading.numbers,
        dates=frozenset(reading.dates),
        soft_dates=frozenset(reading.soft_dates),
        names=frozenset(reading.names),
        literals=frozenset(literals),
        words=frozenset(reading.words),
        mood=_mood(text),
    )


# sentences and questions as memory/sql/memory_lexical_weights.sql reads them: a sentence ends at
# (ASCII) white space after '.', '!' or '?', or after one of them and a closing quote or bracket; it
# asks when it ends in '?', maybe followed by '!', '?', closing quotes or brackets ("Really?!")
_SENTENCE = re.compile(r"(?<=[.!?])[ \t\r\n]+|(?<=[.!?][\"'\u201d\u2019)\]])[ \t\r\n]+")
_ASKS = re.compile(r"\?[!?\"'\u201d\u2019)\]]*[ \t\r\n]*$")
_BRACKETED = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")


def _mood(text: str) -> tuple[bool, bool]:
    """(whether ``text`` asks, whether it states): it has a sentence ending in ``?``, one that holds a
    word and does not. Text in brackets is an aside, neither ("Did Alice pay? (again)" only asks)."""
    asks = states = False
    for sentence in _SENTENCE.split(_BRACKETED.sub(" ", text).strip(" \t\r\n")):
        if _ASKS.search(sentence):
            asks = True
        elif re.search(r"\w", sentence):
            states = True
    return asks, states


def _literals(text: str) -> tuple[str, set[str]]:
    """The literals of ``text`` (casefolded) and the text with its URLs, e-mail addresses and paths
    blanked out (identifiers and quoted text stay: their words are read too)."""
    literals: set[str] = set()

    def take(match: re.Match[str]) -> str:
        literals.add(match.group(0).rstrip(_TRAILING).casefold())
        return " "

    text = _URL.sub(take, text)
    text = _EMAIL.sub(take, text)
    text = _PATH.sub(take, text)
    literals.update(m.group(0).casefold() for m in _IDENTIFIER.finditer(text))
    literals.update((m.group(1) or m.group(2)).strip().casefold() for m in _QUOTED.finditer(text))
    return text, literals


class _Reading:
    """The features of one text's tokens, gathered by reading them left to right (``read``: each
    step reads one token or a run of them, a quantity, a negation, a date, and says where the next
    starts) and then once more for names (``read_names``)."""

    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.strong = self.weak = 0
        self.numbers: Counter[tuple[str, str]] = Counter()
        self.dates: set[str] = set()
        self.soft_dates: set[tuple[str, str]] = set()
        self.names: set[str] = set()
        self.words: set[str] = set()
        self.special: set[int] = set()  # tokens that are negations, numbers or dates: never names

    def at(self, i: int) -> _Token | None:
        return self.tokens[i] if 0 <= i < len(self.tokens) else None

    def read(self) -> None:
        i = 0
        while i < len(self.tokens):
            i = self._step(i)

    def _step(self, i: int) -> int:
        """Reads what starts at token ``i``; returns the index of the next token to read."""
        token = self.tokens[i]
        if token.kind == "num":
            return self._digits(i)
        if token.kind == "sym":
            if token.text == "%" and (self.at(i - 1) is None or self.at(i - 1).kind != "num"):  # type: ignore[union-attr]
                self.numbers[("", "%")] += 1
            return i + 1
        lower = token.lower
        self.words.add(lower)
        if lower in _NEGATIONS or lower.endswith("n't") or lower in _NT_WORDS:
            return self._negation(i)
        if lower in _WEAK_NEGATIONS:
            self.weak += 1
            self.special.add(i)
            return i + 1
        if _is_number_word(lower) or lower in _TIMES or lower in _VAGUE:
            return self._number_words(i)
        found = _date_word(token, (self.at(i - 1), self.at(i + 1)))
        if found is not None:
            return self._date(i, *found)
        return i + 1

    def _digits(self, i: int) -> int:
        """A number written in digits, with the scale or unit written on it (``10k``, ``2am``)."""
        token = self.tokens[i]
        value = _canonical_number(token.text)
        unit = ""
        suffix = token.suffix
        if suffix in _ORDINAL_SUFFIXES:
            suffix = ""
        elif suffix in _SUFFIX_SCALES and isinstance(value, Decimal):
            value *= _SUFFIX_SCALES[suffix]
            suffix = ""
        if suffix:
            unit = _UNITS.get(suffix, suffix)
        self.special.add(i)
        return self._quantity(value, i, i, unit) + 1

    def _quantity(self, value: Decimal | str, first: int, last: int, unit: str = "") -> int:
        """A quantity read from tokens ``first``..``last``: scaled and given its unit by what
        follows (``3 million``, ``16 GB``) or precedes (``$5``). Returns the last token it took."""
        nxt = self.at(last + 1)
        if isinstance(value, Decimal) and nxt is not None and nxt.kind == "word" and nxt.lower in _SCALES:
            value *= _SCALES[nxt.lower]
            self.words.add(nxt.lower)
            last += 1
            self.special.add(last)
            nxt = self.at(last + 1)
        if not unit and _unit(nxt):
            assert nxt is not None
            unit = _unit(nxt) or ""
            if nxt.kind == "word":
                self.words.add(nxt.lower)
            last += 1  # the unit is the number's ("16 GB": no name, "35 days": no date of its own)
            self.special.add(last)
        prev = self.at(first - 1)
        if not unit and prev is not None and prev.kind == "sym" and prev.text in "$€£¥":
            unit = _UNITS[prev.text]
        is_year = (
            isinstance(value, Decimal)
            and not unit
            and value == value.to_integral_value()
            and 1900 <= value <= 2099
            and self.tokens[first].kind == "num"
            and len(self.tokens[first].text) == 4
        )
        if is_year:
            self.dates.add(_number_text(value))
        else:
            self.numbers[(_number_text(value), unit)] += 1
        return last

    def _negation(self, i: int) -> int:
        """A negation word, unless it is none here (``not only``, ``No. 5``); ``no one`` is one."""
        lower = self.tokens[i].lower
        nxt = self.at(i + 1)
        self.special.add(i)
        if lower == "not" and nxt is not None and nxt.lower == "only":
            return i + 1
        if lower == "no" and nxt is not None and nxt.kind == "num" and not nxt.after_space:
            return i + 1  # "No. 5": a number sign
        self.strong += 1
        if lower == "no" and nxt is not None and nxt.lower == "one":
            self.special.add(i + 1)
            self.words.add("one")
            return i + 2
        return i + 1

    def _number_words(self, i: int) -> int:
        """A quantity in words: ``twice``, ``dozens``, or a run that is one value (``two hundred
        and five``, ``twenty-one``); the ``one`` of ``one another`` is none."""
        lower = self.tokens[i].lower
        if lower == "one" and self.at(i + 1) is not None and self.at(i + 1).lower == "another":  # type: ignore[union-attr]
            return i + 1
        if lower in _TIMES:
            self.special.add(i)
            self.numbers[(str(_TIMES[lower]), "times")] += 1
            return i + 1
        if lower in _VAGUE:
            self.special.add(i)
            self.numbers[(lower, "")] += 1
            return i + 1
        j, total, current = i, 0, 0
        last_small: int | None = None  # the last number word since a scale ("twenty" of "twenty-one")
        while j < len(self.tokens) and self.tokens[j].kind == "word":
            w = self.tokens[j].lower
            if w == "and" and j > i and self.tokens[j - 1].lower in _SCALES and j + 1 < len(self.tokens):
                if _word_number(self.tokens[j + 1].lower) is None:
                    break
                self.words.add(w)
                j += 1
                continue
            n = _word_number(w)
            if n is not None:
                # "twenty one" is one number, "one two" two
                if last_small is not None and not (last_small >= 20 and last_small % 10 == 0 and n < 10):
                    break
                current += n
                last_small = n
            elif w in _SCALES:
                if _SCALES[w] == 100:
                    current = max(current, 1) * 100
                else:
                    total += max(current, 1) * _SCALES[w]
                    current = 0
                last_small = None
            elif w == "dozen":
                current = max(current, 1) * 12
                last_small = None
            else:
                break
            self.words.add(w)
            self.special.add(j)
            j += 1
        return self._quantity(Decimal(total + current), i, j - 1) + 1

    def _date(self, i: int, date: str, soft: bool) -> int:
        """The date token ``i`` names (``_date_word``), with the modifier before it (``next week``)."""
        prev = self.at(i - 1)
        self.special.add(i)
        if (
            prev is not None
            and prev.kind == "word"
            and prev.lower in _DATE_MODIFIERS
            and not self.tokens[i].opens_sentence
        ):
            self.dates.add(f"{prev.lower} {date}")
            self.special.add(i - 1)
        elif soft:
            self.soft_dates.add((date, self.tokens[i].lower))
        else:
            self.dates.add(date)
        return i + 1

    def read_names(self) -> None:
        """Words and names; a hyphenated word is also joined (``wifi``) and its parts stay words."""
        tokens, i = self.tokens, 0
        while i < len(tokens):
            j = i + 1
            while j < len(tokens) and tokens[j].joined and tokens[j].kind == tokens[j - 1].kind == "word":
                j += 1
            parts = [t for t in tokens[i:j] if t.kind == "word"]
            if len(parts) > 1:
                self.words.update(("".join(p.lower for p in parts), "-".join(p.lower for p in parts)))
            candidates = [k for k in range(i, j) if tokens[k].kind == "word" and k not in self.special]
            if any(any(c.isupper() for c in tokens[k].text) for k in candidates):
                first = tokens[i]
                if len(parts) > 1:
                    self.names.add("".join(tokens[k].lower for k in candidates))
                elif not (first.opens_sentence and first.lower in _FUNCTION_WORDS) and first.lower not in _I:
                    self.names.add(first.lower)
            i = j
