"""The API documentation pages in Chromium: time from navigation to the first operation visible on
Swagger UI (``/api/v1/docs``) and Redoc (``/api/v1/redoc``), and the OpenAPI document's server time.

The project's web server (uvicorn, one worker, DEBUG off, static files served by the app as
``ENGRAM_SERVE_STATIC=1`` does) runs the code of ``--root`` (default this checkout; give another
checkout to compare). Debian's Chromium (``/usr/bin/chromium``, driven by Playwright) opens each
page ``--runs`` times in a fresh context (no cache: a first visit) after one warm-up visit, and
waits for an operation (``.opblock`` / a Redoc operation section). ``httpx`` then fetches the
document ``--requests`` times as each UI asks for it (JSON for Swagger UI, YAML for Redoc). Needs
PostgreSQL and Redis (the app answers from a tenant-less request)::

    python -m benchmarks api_docs [--runs 20] [--requests 50] [--root /path/to/other/checkout]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from _common import ROOT, django_setup, percentiles, record, web_server

CHROMIUM = Path("/usr/bin/chromium")
PAGES = {
    "swagger ui": ("/api/v1/docs", ".opblock"),
    "redoc": ("/api/v1/redoc", "[data-section-id^='operation/']"),
}
DOCUMENT = {"json (swagger ui)": "application/json", "yaml (redoc)": "application/vnd.oai.openapi"}


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def browser_times(url: str, *, runs: int) -> dict[str, dict[str, float]]:
    """Per page: percentiles of the ms from navigation to the first operation visible."""
    from playwright.sync_api import sync_playwright

    args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
    ]
    figures = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=args, headless=True)
        try:
            for name, (path, operation) in PAGES.items():
                times = []
                for i in range(runs + 1):
                    context = browser.new_context(viewport={"width": 1366, "height": 768})
                    page = context.new_page()
                    t0 = time.perf_counter()
                    page.goto(f"{url}{path}")
                    page.locator(operation).first.wait_for(state="visible", timeout=60_000)
                    if i:  # the first visit warms the server (imports, the document) and the disk
                        times.append((time.perf_counter() - t0) * 1000)
                    context.close()
                figures[name] = percentiles(times)
        finally:
            browser.close()
    return figures


def document_times(url: str, *, requests: int) -> dict[str, dict[str, Any]]:
    """Per format: percentiles of the ms to fetch the document, and its size (bytes, as sent)."""
    import httpx

    figures: dict[str, dict[str, Any]] = {}
    with httpx.Client(base_url=url, timeout=60) as client:
        for name, accept in DOCUMENT.items():
            headers = {"Accept": accept, "Accept-Encoding": "gzip"}
            client.get("/api/v1/schema", headers=headers)
            times = []
            for _ in range(requests):
                t0 = time.perf_counter()
                response = client.get("/api/v1/schema", headers=headers)
                times.append((time.perf_counter() - t0) * 1000)
                assert response.status_code == 200, response.status_code
            sent = int(response.headers.get("content-length") or len(response.content))
            figures[name] = {
                **percentiles(times),
                "bytes": sent,
                "encoding": response.headers.get("content-encoding", ""),
            }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--root", default=str(ROOT), help="the checkout whose code the server runs")
    args = parser.parse_args()
    django_setup()
    print(f"start: {load()}; server code: {args.root}", flush=True)
    with web_server("uvicorn", workers=1, env={"ENGRAM_SERVE_STATIC": "1"}, root=args.root) as server:
        pages = browser_times(server.url.replace("127.0.0.1", "localhost"), runs=args.runs)
        documents = document_times(server.url, requests=args.requests)
    for name, stats in pages.items():
        print(
            f"{name:<18} first operation visible  n={stats['n']:.0f}  p50 {stats['p50']:6.0f} ms  "
            f"p95 {stats['p95']:6.0f} ms  max {stats['max']:6.0f} ms"
        )
    for name, stats in documents.items():
        print(
            f"document {name:<18} n={stats['n']:.0f}  p50 {stats['p50']:6.1f} ms  p95 {stats['p95']:6.1f} ms  "
            f"{stats['bytes']:,} bytes {stats['encoding'] or 'uncompressed'}"
        )
    record(pages=pages, documents=documents, root=args.root, load=list(os.getloadavg()))
    print(f"end: {load()}")


if __name__ == "__main__":
    main()
