"""An OpenAI-compatible chat endpoint, for abstractive summaries and fact extraction (optional).

``ENGRAM_LLM_BASE_URL`` (with ``ENGRAM_LLM_MODEL`` and ``ENGRAM_LLM_API_KEY``) turns it on; without
it the consolidation jobs use the deterministic extractive summarizer and only promote memories
that carry a fact hint. Requests ask for ``temperature: 0``; tests replay recorded responses from a
local server (no network).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import httpx
from django.conf import settings

from core.errors import ServiceUnavailable

logger = logging.getLogger(__name__)

SUMMARY_PROMPT = (
    "You condense part of a conversation between people and AI agents into a faithful summary for "
    "later recall. Keep, verbatim where you can: every constraint that was agreed (must, never, only, "
    "at most, at least, deadlines), every decision, every tool call and its result, every named "
    "entity (people, organisations, places, products), every number and every date. Drop greetings "
    "and filler. Do not invent anything. Answer with the summary only, as short lines."
)

EXTRACT_PROMPT = (
    "Extract the facts the text states as subject-predicate-object triples. Answer with JSON only: "
    '{"facts": [{"subject": "...", "predicate": "snake_case_verb", "object": {"entity": "..."}}]}; '
    'an object that is a value is {"string": "..."}, {"number": n}, {"date": "YYYY-MM-DD"} or '
    '{"boolean": true}. Answer {"facts": []} when the text states no fact.'
)


class LLMUnavailable(ServiceUnavailable):
    """The chat endpoint could not be reached or answered something unusable."""


def llm_configured() -> bool:
    """Whether an OpenAI-compatible chat endpoint is configured (``ENGRAM["LLM_BASE_URL"]``)."""
    return bool(settings.ENGRAM.get("LLM_BASE_URL"))


def chat(system: str, user: str) -> str:
    """POST ``{base}/chat/completions`` (OpenAI's chat API shape, ``temperature`` 0) and return the
    first choice's message text. Raises ``LLMUnavailable`` on a timeout (``ENGRAM["LLM_TIMEOUT"]``
    seconds; its message says so), a transport error, an error status, or a body without
    ``choices[0].message.content``."""
    conf = settings.ENGRAM
    headers = {"Authorization": f"Bearer {conf['LLM_API_KEY']}"} if conf.get("LLM_API_KEY") else {}
    body = {
        "model": conf["LLM_MODEL"],
        "temperature": 0,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }
    try:
        response = httpx.post(
            conf["LLM_BASE_URL"].rstrip("/") + "/chat/completions",
            json=body,
            headers=headers,
            timeout=conf.get("LLM_TIMEOUT", 30.0),
        )
        response.raise_for_status()
        text = response.json()["choices"][0]["message"]["content"]
    except httpx.TimeoutException as exc:
        logger.warning("chat endpoint timed out: %s", exc)
        raise LLMUnavailable("The language model endpoint timed out.") from exc
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        logger.warning("chat endpoint failed: %s", exc)
        raise LLMUnavailable("The language model endpoint is unavailable.") from exc
    if not isinstance(text, str):
        raise LLMUnavailable("The language model answered no text.")
    return text.strip()


def summarize_abstractive(lines: list[str]) -> str:
    """An abstractive summary of ``lines`` (events or summaries, one per line) by the chat endpoint,
    with ``SUMMARY_PROMPT``. Raises ``LLMUnavailable``."""
    return chat(SUMMARY_PROMPT, "\n".join(lines))


_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def extract_triples(text: str) -> list[dict[str, Any]]:
    """Fact hints ``{"subject", "predicate", "object"}`` the chat endpoint reads in ``text``
    (``EXTRACT_PROMPT``); malformed items are dropped. Raises ``LLMUnavailable``."""
    answer = chat(EXTRACT_PROMPT, text)
    match = _JSON_OBJECT.search(answer)
    try:
        facts = json.loads(match.group(0) if match else answer).get("facts", [])
    except (ValueError, AttributeError):
        raise LLMUnavailable("The language model answered no JSON.") from None
    return [
        f
        for f in facts
        if isinstance(f, dict)
        and isinstance(f.get("subject"), str)
        and isinstance(f.get("predicate"), str)
        and isinstance(f.get("object"), dict)
    ]
