"""The comparison that decides whether a near duplicate says the same thing (``memory.semantic.
differences``): a table of pairs an embedding places close together, those that differ in what
matters (negation, a number, a date, a name, a literal, an opposite, a question) and those that only reword.

The same table runs through the API and the batch path in ``test_near_duplicate_differences``."""

from __future__ import annotations

import pytest

from memory.semantic.differences import Difference, differences
from memory.semantic.services.duplicates import normalise_text
from memory.semantic.updates import Relation, relation

NEG, NUM, DATE, NAME, LIT, OPP, ASK = (
    Difference.NEGATION,
    Difference.NUMBER,
    Difference.DATE,
    Difference.NAME,
    Difference.LITERAL,
    Difference.OPPOSITE,
    Difference.QUESTION,
)

# (stored, written, what differs): the second must be stored beside the first, never merged into it
CONTRADICTIONS: list[tuple[str, str, Difference]] = [
    # negation, with contractions and without their apostrophe
    ("Patient X is allergic to penicillin.", "Patient X is not allergic to penicillin.", NEG),
    ("Patient X is allergic to penicillin", "Patient X isn't allergic to penicillin", NEG),
    ("Patient X is allergic to penicillin", "Patient X isn\u2019t allergic to penicillin", NEG),
    ("The user prefers dark mode.", "The user no longer prefers dark mode.", NEG),
    ("Alice eats meat.", "Alice never eats meat.", NEG),
    ("Bob drinks coffee in the morning.", "Bob doesnt drink coffee in the morning.", NEG),
    ("The nightly report has errors.", "The nightly report has no errors.", NEG),
    (
        "The build server can be reached from the VPN.",
        "The build server cannot be reached from the VPN.",
        NEG,
    ),
    ("Carol is a smoker.", "Carol is a non-smoker.", NEG),
    ("Nobody on the team uses Windows.", "Everybody on the team uses Windows.", NEG),
    # opposites: a prefix that negates, or a word and its antonym
    ("The partner API is available to resellers.", "The partner API is unavailable to resellers.", OPP),
    ("Dana likes sushi.", "Dana dislikes sushi.", OPP),
    ("The feature flag is enabled in production.", "The feature flag is disabled in production.", OPP),
    ("The invoice was paid before the deadline.", "The invoice was paid after the deadline.", OPP),
    ("The migration test passed on staging.", "The migration test failed on staging.", OPP),
    ("Remote access is allowed for contractors.", "Remote access is forbidden for contractors.", OPP),
    # numbers: digits, number words, units, signs, separators
    (
        "The deployment pipeline runs every night at 2am UTC.",
        "The deployment pipeline runs every night at 3am UTC.",
        NUM,
    ),
    (
        "The deployment pipeline runs every night at 2am UTC.",
        "The deployment pipeline runs every night at 2pm UTC.",
        NUM,
    ),
    ("The database server has 16 GB of RAM.", "The database server has 32 GB of RAM.", NUM),
    ("The database server has 16 GB of RAM.", "The database server has 16 TB of RAM.", NUM),
    ("The budget is 5,000 dollars.", "The budget is 6,000 dollars.", NUM),
    ("The platform team has five engineers.", "The platform team has six engineers.", NUM),
    ("The platform team has five engineers.", "The platform team has 6 engineers.", NUM),
    ("The order has twenty-one items.", "The order has twenty-two items.", NUM),
    ("The discount for members is 10%.", "The discount for members is 15%.", NUM),
    ("Room 101 is booked for the offsite.", "Room 102 is booked for the offsite.", NUM),
    ("The price rose to $4.50.", "The price rose to $4.05.", NUM),
    ("The freezer is set to -18 degrees.", "The freezer is set to 18 degrees.", NUM),
    ("The launch is on 3 March.", "The launch is on 4 March.", NUM),
    ("The launch is on the 3rd of March.", "The launch is on the 4th of March.", NUM),
    ("Standup starts at 9:30.", "Standup starts at 9:45.", NUM),
    ("Alice has two cats.", "Alice has one cat.", NUM),
    # dates: weekdays, months, years, relative days, parts of the day, periods
    ("The meeting is on Monday.", "The meeting is on Tuesday.", DATE),
    ("meeting on Monday", "meeting on Tuesday", DATE),
    ("The launch is planned for March.", "The launch is planned for April.", DATE),
    ("The conference is in May.", "The conference is in June.", DATE),
    ("The contract with Acme ends in 2026.", "The contract with Acme ends in 2027.", DATE),
    ("The design review is next week.", "The design review is this week.", DATE),
    ("The call with the auditors is tomorrow.", "The call with the auditors is today.", DATE),
    ("Standup is in the morning.", "Standup is in the afternoon.", DATE),
    ("The usage report is sent weekly.", "The usage report is sent monthly.", DATE),
    ("Backups are kept for 35 days.", "Backups are kept for 35 weeks.", NUM),
    # names: people, companies, places, acronyms, letters; at the start of a sentence too
    ("Alice works at Acme.", "Bob works at Acme.", NAME),
    ("The on-call engineer this week is Alice.", "The on-call engineer this week is Priya.", NAME),
    ("Alice works at Acme Corp.", "Alice works at Initech Corp.", NAME),
    ("The office is in Berlin.", "The office is in Munich.", NAME),
    ("The database runs on AWS.", "The database runs on GCP.", NAME),
    ("Patient X is allergic to penicillin.", "Patient Y is allergic to penicillin.", NAME),
    ("Bob reports to Carol.", "Bob reports to Dave.", NAME),
    # literals: addresses, links, paths, quoted words
    ("Send invoices to billing@acme.example.", "Send invoices to accounts@acme.example.", LIT),
    (
        "The guide is at https://docs.acme.example/start.",
        "The guide is at https://docs.acme.example/install.",
        LIT,
    ),
    ("The service writes its logs to /var/log/app.", "The service writes its logs to /var/log/api.", LIT),
    ('The guest wifi is called "falcon".', 'The guest wifi is called "eagle".', LIT),
    ("Set `retry_limit` in the config file.", "Set `retry_delay` in the config file.", LIT),
    # a question is no statement (decision 0121)
    ("Caroline wants to pursue counseling.", "Does Caroline want to pursue counseling?", ASK),
    ("Did Alice pay the invoice?", "Did Alice pay the invoice? She did.", ASK),
    ("The office is closed on Fridays.", "The office is closed on Fridays?", ASK),
    ("Caroline really quit her job.", "Did Caroline really quit her job?!", ASK),
]

# (stored, written): rewordings; the second reinforces the first
PARAPHRASES: list[tuple[str, str]] = [
    (
        "The deployment pipeline runs every night at 2am UTC.",
        "The deployment pipeline runs each night at 2am UTC.",
    ),
    (
        "The deployment pipeline runs every night at 2am UTC.",
        "The deployment pipeline runs every night at 2 am UTC.",
    ),
    ("The staging cluster is called Borealis.", "The staging cluster is called Borealis"),
    ("Patient X isn't allergic to penicillin.", "Patient X is not allergic to penicillin."),
    ("Carol doesn't work on Sundays.", "Carol does not work on Sundays."),
    ("Alice never eats meat.", "Alice does not eat meat."),
    ("The platform team has five engineers.", "The platform team has 5 engineers."),
    ("The budget is 5,000 dollars.", "The budget is 5000 dollars."),
    ("The price is $4.50.", "The price is 4.50 dollars."),
    ("The server has sixteen GB of RAM and four cores.", "The server has 16 GB of RAM and 4 cores."),
    ("The order has twenty-one items.", "The order has 21 items."),
    ("The launch is on 3 March.", "The launch is on March 3rd."),
    ("Standup starts at 9:00.", "Standup starts at 9."),
    ("The meeting is on Monday.", "The meeting takes place on Monday."),
    ("The meeting is on Monday", "the meeting is on monday!"),
    ("Meetings with the Design Team happen on Fridays.", "Meetings with the design team happen on Fridays!"),
    ("The customer prefers email over phone calls.", "The customer prefers e-mail over phone calls."),
    ("The user's favourite colour is blue.", "The user's favorite color is blue."),
    ("Alice works at Acme.", "Alice is employed at Acme."),
    ("The Berlin office hired Carol as an engineer.", "The Berlin office hired Carol as engineer."),
    ("Bob's laptop is a ThinkPad.", "Bob has a ThinkPad laptop."),
    (
        "The quarterly planning meeting is at the main office.",
        "The quarterly planning meeting is in the main office.",
    ),
    ("The review happens before the release.", "The review happens before the release, always."),
    ("Guests may use the wifi in May.", "Guests may use the Wi-Fi in May."),
    ("The report is sent every week.", "The report is sent each week."),
    ("Not only Alice but also Bob joined.", "Alice and Bob joined."),
    ("Does the user prefer dark mode?", "Does the user prefer the dark mode?"),
    ("The docs live at https://acme.example/?page=2.", "The docs are at https://acme.example/?page=2."),
]


@pytest.mark.parametrize(("stored", "written", "kind"), CONTRADICTIONS)
def test_a_contradiction_differs_in_what_matters(stored: str, written: str, kind: Difference) -> None:
    assert kind in differences(stored, written)
    assert kind in differences(written, stored)  # the comparison is symmetric


@pytest.mark.parametrize(("stored", "written"), PARAPHRASES)
def test_a_rewording_differs_in_nothing_that_matters(stored: str, written: str) -> None:
    assert normalise_text(stored) != normalise_text(written)  # a near duplicate, not an exact one
    assert differences(stored, written) == frozenset()
    assert differences(written, stored) == frozenset()


@pytest.mark.parametrize("text", sorted({t for pair in CONTRADICTIONS + PARAPHRASES for t in pair[:2]}))
def test_a_text_and_its_exact_duplicates_differ_in_nothing(text: str) -> None:
    # what step 1 of the write path calls an exact duplicate (the same ``normalise_text``) never differs
    assert differences(text, text) == frozenset()
    assert differences(text, normalise_text(text)) == frozenset()
    assert differences(text, "  " + text.upper() + " ") == frozenset()


def test_a_stretch_of_words_against_none_is_no_question() -> None:
    # the update rule compares the stretches where two aligned texts differ: "anymore" against
    # nothing neither asks nor states, so only the negation of the pair differs (one value slot)
    assert differences("not vegetarian anymore", "") == {NEG}
    assert differences("anymore", "") == frozenset()
    assert (
        relation("Oliver is not vegetarian anymore.", "Oliver is vegetarian.", similarity=0.8, threshold=0.97)
        == Relation.UPDATE
    )


def test_blank_and_unusual_text_is_compared_without_error() -> None:
    assert differences("", "") == frozenset()
    assert differences("...", "!!!") == frozenset()
    assert Difference.NUMBER in differences("", "42")
    assert differences("日本語のテキスト", "日本語のテキスト") == frozenset()
    assert differences("x" * 40_000, "x" * 40_000) == frozenset()
