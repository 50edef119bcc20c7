"""The documentation site builds strictly: a broken link or anchor, a missing snippet, a reference
mkdocstrings cannot resolve, a page the build cannot render fails the suite (``mkdocs build
--strict``, as ``./engram docs`` serves it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories import BASE_DIR

pytestmark = pytest.mark.timeout(600)


def test_mkdocs_build_strict_passes(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=BASE_DIR,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-6000:]
    # the generated pages hold what the hooks made: every setting, the API document, a plot
    settings_page = (site / "reference" / "settings" / "index.html").read_text()
    assert "DATABASE_URL" in settings_page and "ENGRAM_SIGNING_KEY" in settings_page
    assert (site / "reference" / "openapi.json").stat().st_size > 100_000
    assert (site / "assets" / "redoc" / "redoc.standalone.js").exists()
    assert list((site / "benchmarks-img").glob("*.png"))
    # nothing is loaded from another site: no font CDN, no script or stylesheet by absolute URL
    for page in site.rglob("*.html"):
        html = page.read_text()
        # a URL of the font CDN, not a page's prose naming it (decision 0086 does)
        assert "//fonts.googleapis.com" not in html and "//fonts.gstatic.com" not in html, page
        assert '<script src="http' not in html and '<link rel="stylesheet" href="http' not in html, page
