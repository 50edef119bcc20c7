"""Helpers of the console's browser tests: a scratch tenant served under its own host name, the
people who log in, Chromium (Debian's, driven by Playwright) at 1366x768, and where screenshots go."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.contrib.auth.models import Group, User
from django_tenants.utils import tenant_context

from tenants.models import Domain, Tenant
from tests.factories import BASE_DIR, PASSWORD
from tests.memory.knowledge.test_review_queue_browser import CHROMIUM_ARGS

SCREENS = BASE_DIR / "var" / "test-artifacts" / "screens"
VIEWPORT = {"width": 1366, "height": 768}


def site_host(tenant: Tenant) -> str:
    """``tenant``'s admin host (``<schema>.localhost`` with '-' for '_', which a host name may not
    hold), registered as its primary domain."""
    host = f"{tenant.schema_name.replace('_', '-')}.localhost"
    Domain.objects.create(domain=host, tenant=tenant, is_primary=True)
    return host


def people_create(tenant: Tenant, **groups: str) -> None:
    """Staff users of ``tenant`` named as the keywords, each in the group given ("" for none)."""
    with tenant_context(tenant):
        for name, group in groups.items():
            user = User.objects.create_user(name, f"{name}@example.com", PASSWORD, is_staff=True)
            if group:
                user.groups.add(Group.objects.get(name=group))


@contextmanager
def chromium(path: Path) -> Iterator[Any]:
    """A headless Chromium for the block."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(path), args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def login(browser: Any, base: str, username: str, *, then: str = "/admin/") -> Any:
    """A new page of a new context at 1366x768, logged in as ``username`` on ``base`` (and at
    ``then``)."""
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.set_default_timeout(20_000)
    page.goto(f"{base}{then}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")
    return page


def shot(page: Any, name: str) -> None:
    """The page's viewport (1366x768) saved as ``SCREENS/name``."""
    SCREENS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENS / name))
