"""An htmx request to the tenant admin from someone whose session expired (or who never logged in)
is sent to the login page as a whole page (``HX-Redirect``), never given the login form to swap into
the fragment it asked for: the compliance console's polling panels, the review queue, the skill
editor and every other admin URL. A walker takes the URLs from the tenant URLconf, so a view added
later is covered too."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

from django.contrib.sessions.models import Session
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RoutePattern
from django.utils import timezone
from django_tenants.utils import tenant_context

from tests.factories import HTMX, Caller, admin_client

UUID = "00000000-0000-0000-0000-000000000001"
SAMPLE = {"int": "1", "str": "x", "slug": "x", "path": "1", "uuid": UUID}
# Django's login page itself answers anyone
OPEN = {"/admin/login/"}


def admin_paths() -> Iterator[str]:
    """Every route of the tenant URLconf under ``admin/``, its converters filled with sample values
    (regex routes, the app index and the catch-all, are left out)."""

    def walk(patterns: list[URLPattern | URLResolver], prefix: str) -> Iterator[str]:
        for pattern in patterns:
            if not isinstance(pattern.pattern, RoutePattern):
                continue
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, route)
                continue
            yield "/" + re.sub(r"<(?:(\w+):)?\w+>", lambda m: SAMPLE.get(m.group(1) or "str", "x"), route)

    yield from (p for p in walk(get_resolver("config.urls").url_patterns, "") if p.startswith("/admin/"))


def assert_sent_to_login(response, page: str) -> None:  # type: ignore[no-untyped-def]
    assert response.status_code == 200, (response.status_code, response.get("Location"))
    target = urlsplit(response["HX-Redirect"])
    assert target.path == "/admin/login/"
    assert parse_qs(target.query) == {"next": [page]}
    assert b"<form" not in response.content


def test_an_expired_session_polling_the_console_is_sent_to_the_login_page(alice: Caller) -> None:
    officer = admin_client(alice.tenant, "officer", group="compliance officer")
    page = f"/admin/compliance/export/{UUID}/progress/"
    assert officer.get(page, **HTMX).status_code == 404  # logged in: the view answers (no such export)
    with tenant_context(alice.tenant):
        Session.objects.update(expire_date=timezone.now() - timedelta(seconds=1))
    for fragment in (
        page,
        "/admin/compliance/chaincheck/1/progress/",
        f"/admin/compliance/erasurerequest/{UUID}/state/",
    ):
        response = officer.get(fragment, HTTP_HX_CURRENT_URL=f"http://alpha.localhost{page}", **HTMX)
        assert_sent_to_login(response, page)
    # without htmx, the admin's own redirect to the login page, as before
    plain = officer.get(page)
    assert plain.status_code == 302 and plain["Location"].startswith("/admin/login/?next=")


def test_every_admin_url_sends_htmx_without_a_session_to_the_login_page(alice: Caller) -> None:
    client = Client(HTTP_HOST="alpha.localhost")
    paths = [p for p in admin_paths() if p not in OPEN]
    assert len(paths) > 100, paths  # the walker found the admin (every model's pages, the console)
    refused = []
    for path in paths:
        for method in (client.get, client.post):
            response = method(path, HTTP_HX_CURRENT_URL="http://alpha.localhost/admin/", **HTMX)
            if response.status_code != 200 or not response.get("HX-Redirect", "").startswith("/admin/login/"):
                refused.append((method.__name__, path, response.status_code))
    assert refused == []
    # the page htmx reports is the one to come back to only when it is on this site
    foreign = client.get(
        f"/admin/compliance/export/{UUID}/progress/",
        HTTP_HX_CURRENT_URL="https://evil.example/admin/",
        **HTMX,
    )
    assert_sent_to_login(foreign, f"/admin/compliance/export/{UUID}/progress/")
