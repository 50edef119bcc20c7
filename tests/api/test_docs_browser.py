"""The API documentation pages in a real browser (Playwright drives Debian's Chromium against
uvicorn): Swagger UI and Redoc each show every operation of the OpenAPI document, and nothing is
fetched from another host (the pages' Content-Security-Policy refuses Redoc's logo from its CDN);
axe-core finds no critical or serious violation. Screenshots at 1366x768 in ``var/test-artifacts/screens/``. How long
they take: ``python -m benchmarks api_docs``."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.test import Client

from tests.compliance.browser import VIEWPORT, chromium, shot
from tests.compliance.test_accessibility_browser import AXE, BLOCKING, VIOLATIONS
from tests.factories import asgi_server
from tests.memory.knowledge.test_review_queue_browser import chromium_path  # noqa: F401

PAGES = {
    "/api/v1/docs": (".opblock", "api-docs-swagger.png"),
    "/api/v1/redoc": ("[data-section-id^='operation/']", "api-docs-redoc.png"),
}


@pytest.mark.django_db
def test_both_doc_pages_show_every_operation_from_this_host_in_chromium(
    chromium_path: Path,  # noqa: F811 (the fixture imported above)
) -> None:
    document = Client().get("/api/v1/schema", HTTP_ACCEPT="application/json").json()
    operations = sum(1 for item in document["paths"].values() for op in item.values() if isinstance(op, dict))
    with asgi_server(ENGRAM_SERVE_STATIC="1") as port, chromium(chromium_path) as browser:
        for path, (operation, screenshot) in PAGES.items():
            page = browser.new_context(viewport=VIEWPORT).new_page()
            hosts: set[str] = set()  # of the requests that reached a server
            refused: dict[str, str] = {}  # host: why the browser did not send the request
            page.on(
                "requestfinished", lambda request, seen=hosts: seen.add(urlsplit(request.url).hostname or "")
            )
            page.on(
                "requestfailed",
                lambda request, seen=refused: seen.update(
                    {urlsplit(request.url).hostname or "": request.failure}
                ),
            )
            page.goto(f"http://localhost:{port}{path}")
            page.locator(operation).first.wait_for(state="visible", timeout=60_000)
            assert page.locator(operation).count() == operations, path
            assert hosts - {""} == {"localhost"}, (path, hosts)  # "": the UIs' data: and blob: URLs
            # refused by the page's policy, not merely unanswered (this machine has no internet)
            assert all(why == "csp" for why in refused.values()), (path, refused)
            shot(page, screenshot)
            page.add_script_tag(path=str(AXE))
            blocking = [v for v in page.evaluate(VIOLATIONS) if v["impact"] in BLOCKING]
            assert not blocking, (path, blocking)
