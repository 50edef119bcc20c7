"""Token counting for context assembly, with a real tokenizer loaded from a local ``tokenizer.json``.

The default is the WordPiece tokenizer of all-MiniLM-L6-v2 (BERT uncased vocabulary, 30,522
pieces), shipped beside the embedding model in ``../shared/models/all-MiniLM-L6-v2-onnx``: it is the
one tokenizer every Engram install has offline. Its counts for English prose are close to those of
the BPE tokenizers of chat models (within about 10-20%); a tenant whose agents talk to a known model
names that model's ``tokenizer.json`` in ``ENGRAM["TOKENIZERS"]`` (env ``ENGRAM_TOKENIZERS``,
``name=path,...``) and picks it with ``Tenant.context_tokenizer``. Files are read with the Hugging
Face ``tokenizers`` library (Rust); nothing is downloaded.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from tokenizers import Tokenizer

from core.errors import InvalidInput, ServiceUnavailable

_lock = threading.Lock()


@dataclass(frozen=True)
class TokenCounter:
    """Counts the tokens of texts with one tokenizer (``name`` from ``ENGRAM["TOKENIZERS"]``).

    Counts exclude special tokens (``[CLS]``, ``[SEP]``): the assembled context is one text, and the
    model the agent calls adds its own.
    """

    name: str
    tokenizer: Tokenizer

    def count(self, text: str) -> int:
        """Tokens in ``text`` (0 for an empty string)."""
        if not text:
            return 0
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Tokens in each of ``texts``, encoded in one batch (the library spreads it over cores)."""
        if not texts:
            return []
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encodings]


@functools.cache
def _load(name: str, path: str) -> TokenCounter:
    with _lock:
        tokenizer = Tokenizer.from_file(path)
        # model files carry the settings of their model's input (MiniLM's pads a batch to its
        # longest text and truncates at 128): a count needs neither
        tokenizer.no_padding()
        tokenizer.no_truncation()
        return TokenCounter(name, tokenizer)


def token_counter(name: str = "") -> TokenCounter:
    """The counter called ``name`` (blank: ``ENGRAM["DEFAULT_TOKENIZER"]``), loaded once per process.

    Raises ``InvalidInput`` (field ``tokenizer``) for a name the settings do not list and
    ``ServiceUnavailable`` when its file is missing or unreadable (a deployment fault, not the
    caller's).
    """
    name = name or settings.ENGRAM["DEFAULT_TOKENIZER"]
    paths: dict[str, str] = settings.ENGRAM["TOKENIZERS"]
    if name not in paths:
        raise InvalidInput(
            f"No tokenizer named {name!r}; configured: {', '.join(sorted(paths))}.", field="tokenizer"
        )
    path = paths[name]
    if not Path(path).is_file():
        raise ServiceUnavailable(f"The tokenizer {name!r} is not installed ({path} is missing).")
    try:
        return _load(name, path)
    except Exception as exc:  # the library raises a bare Exception for a malformed file
        raise ServiceUnavailable(f"The tokenizer {name!r} cannot be loaded: {exc}") from exc
