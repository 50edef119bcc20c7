"""Parsing CEL with cel-python's grammar into ``lark`` trees, kept in a cache bounded by nodes."""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict

import celpy
import lark

MAX_EXPRESSION_CHARS = 2000


class CelCheckError(Exception):
    """The expression does not parse or is not well typed. ``column`` is 1-based when known."""

    def __init__(self, message: str, *, column: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.column = column

    def __str__(self) -> str:
        return self.message if self.column is None else f"{self.message} (column {self.column})"


@functools.cache
def environment() -> celpy.Environment:
    """cel-python's environment (the CEL grammar and standard functions), made once."""
    return celpy.Environment()


def parse(text: str) -> lark.Tree:
    """Parse ``text`` as CEL. Raises ``CelCheckError`` (with the column) for a syntax error."""
    if not isinstance(text, str) or not text.strip():
        raise CelCheckError("An expression is required.")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise CelCheckError(f"At most {MAX_EXPRESSION_CHARS} characters.")
    return _parse(text)


def _compile(text: str) -> lark.Tree:
    try:
        return environment().compile(text)
    except celpy.CELParseError as exc:
        column = getattr(exc, "column", None)
        first = str(exc).splitlines()[0] if str(exc) else "syntax error"
        raise CelCheckError(f"CEL syntax error near {first!r}", column=column) from None
    except RecursionError:
        raise CelCheckError("The expression nests too deeply.") from None


class _TreeCache:
    """Parse trees by their text, least recently used first out, holding at most ``max_nodes`` nodes
    in all (``tree_size``). Parsing is most of a compile (lark's LALR parser: about 1 ms for a
    condition of 20 tokens) and the editor compiles the whole skill again at every pause in typing,
    so trees are kept (the checker only reads them); a tree costs about 700 bytes a node, up to 7 MB
    for 2,000 characters, so the cache is bounded by nodes, not entries. Thread-safe."""

    def __init__(self, max_nodes: int) -> None:
        self.max_nodes = max_nodes
        self.trees: OrderedDict[str, tuple[lark.Tree, int]] = OrderedDict()
        self.nodes = 0
        self.lock = threading.Lock()

    def __call__(self, text: str) -> lark.Tree:
        with self.lock:
            hit = self.trees.get(text)
            if hit is not None:
                self.trees.move_to_end(text)
                return hit[0]
        tree = _compile(text)
        size = tree_size(tree)
        if size <= self.max_nodes // 10:  # one huge tree may not push out everything else
            with self.lock:
                if text not in self.trees:
                    self.trees[text] = (tree, size)
                    self.nodes += size
                while self.nodes > self.max_nodes:
                    _, (_, dropped) = self.trees.popitem(last=False)
                    self.nodes -= dropped
        return tree

    def cache_clear(self) -> None:
        with self.lock:
            self.trees.clear()
            self.nodes = 0


# about 70 MB; a typical condition has 20 to 80 nodes
_parse = _TreeCache(max_nodes=100_000)


def tree_size(tree: lark.Tree) -> int:
    """The nodes of a parse tree, a token counting its characters: what one evaluation visiting each
    node once and touching each literal once (a string literal costs its length) spends."""
    return 1 + sum(
        len(child) if isinstance(child, lark.Token) else 1
        for node in tree.iter_subtrees()
        for child in node.children
    )
