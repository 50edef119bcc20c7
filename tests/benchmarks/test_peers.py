"""benchmarks/peers.py's --base worker: it must run the other checkout's code, and say so when not."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _peers():  # type: ignore[no-untyped-def]
    # the script imports its siblings (corpus, _common) as top-level modules
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module("benchmarks.peers")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_a_worker_finds_the_modules_loaded_from_another_checkout(tmp_path: Path) -> None:
    peers = _peers()
    assert peers.loaded_elsewhere(str(ROOT)) == []
    wrong = peers.loaded_elsewhere(str(tmp_path))
    assert any(line.startswith("memory.checkpoints.services: ") for line in wrong)
    assert all(line.split(": ", 1)[1].startswith(str(ROOT)) for line in wrong)
