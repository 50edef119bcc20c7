"""The admin's CSRF protection holds against a token the caller chose (issue 28, item 15).

Django's default keeps the CSRF secret in a cookie and accepts a POST whose token matches it; over
plain HTTP with no Origin header nothing else is checked. A sibling tenant host (``beta.localhost``
beside ``alpha.localhost``) can set a cookie for the parent domain, so it could plant a cookie and
post the matching token. The secret lives in the session instead (server-side, in the tenant's own
schema): a forged cookie is ignored, and nothing a sibling host can obtain or plant passes.

Django's test client with ``enforce_csrf_checks=True``, as a browser without an Origin header.
"""

from __future__ import annotations

import re

from django.conf import settings
from django.contrib.auth.models import Group
from django.test import Client
from django_tenants.utils import tenant_context

from tenants.models import Tenant
from tests.factories import PASSWORD, staff_user

FORGED = "F" * 32  # a CSRF secret of the caller's choosing (the cookie's form before Django 4.1)
TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def strict_client(tenant: Tenant) -> Client:
    """A client of ``tenant``'s admin whose requests go through the CSRF check."""
    return Client(HTTP_HOST=f"{tenant.schema_name}.localhost", enforce_csrf_checks=True)


def form_token(client: Client, url: str) -> str:
    """The CSRF token a page's form carries."""
    page = client.get(url)
    assert page.status_code == 200, (url, page.status_code)
    match = TOKEN.search(page.content.decode())
    assert match, f"no CSRF token in the form of {url}"
    return match.group(1)


def log_in(client: Client, username: str) -> None:
    token = form_token(client, "/admin/login/")
    response = client.post(
        "/admin/login/", {"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302, "login failed"


def group_exists(tenant: Tenant, name: str) -> bool:
    with tenant_context(tenant):
        return Group.objects.filter(name=name).exists()


def test_a_forged_cookie_and_token_without_an_origin_are_refused(tenant_a: Tenant) -> None:
    staff_user(tenant_a, "root", superuser=True)
    client = strict_client(tenant_a)
    log_in(client, "root")
    # the real token works (the check is on, and the admin's own forms pass it)
    real = form_token(client, "/admin/auth/group/add/")
    assert (
        client.post("/admin/auth/group/add/", {"name": "real", "csrfmiddlewaretoken": real}).status_code
        == 302
    )
    assert group_exists(tenant_a, "real")
    # a cookie and a token both of the caller's choosing, no Origin, no Referer
    client.cookies[settings.CSRF_COOKIE_NAME] = FORGED
    refused = client.post("/admin/auth/group/add/", {"name": "forged", "csrfmiddlewaretoken": FORGED})
    assert refused.status_code == 403
    refused = client.post("/admin/auth/group/add/", {"name": "forged"}, HTTP_X_CSRFTOKEN=FORGED)
    assert refused.status_code == 403
    assert not group_exists(tenant_a, "forged")


def test_the_admin_sets_no_csrf_cookie(tenant_a: Tenant) -> None:
    """The secret never leaves the server: no page of the admin sets a cookie with it."""
    staff_user(tenant_a, "root", superuser=True)
    client = strict_client(tenant_a)
    log_in(client, "root")
    for url in ("/admin/login/", "/admin/", "/admin/auth/group/add/", "/admin/memory/contradiction/queue/"):
        response = client.get(url)
        assert response.status_code in (200, 302), url
        assert settings.CSRF_COOKIE_NAME not in response.cookies, url
    assert settings.CSRF_COOKIE_NAME not in client.cookies


def test_nothing_a_sibling_tenant_host_can_plant_passes(tenant_a: Tenant, tenant_b: Tenant) -> None:
    """What a sibling host can obtain and plant in a browser of alpha's admin: a session and token
    of its own tenant, or an anonymous session of alpha with its token (from alpha's login page).
    Neither lets a POST change anything, and the victim's own session ignores a planted cookie."""
    staff_user(tenant_a, "victim", superuser=True)
    staff_user(tenant_b, "attacker", superuser=True)
    sibling = strict_client(tenant_b)
    log_in(sibling, "attacker")
    sibling_token = form_token(sibling, "/admin/auth/group/add/")
    anonymous = strict_client(tenant_a)
    anonymous_token = form_token(anonymous, "/admin/login/")

    sessions = [
        (client.cookies[settings.SESSION_COOKIE_NAME].value, token)
        for client, token in ((sibling, sibling_token), (anonymous, anonymous_token))
        if settings.SESSION_COOKIE_NAME in client.cookies  # a login page may not start a session
    ]
    assert sessions
    for planted, token in sessions:
        browser = strict_client(tenant_a)
        browser.cookies[settings.SESSION_COOKIE_NAME] = planted
        browser.cookies[settings.CSRF_COOKIE_NAME] = FORGED
        response = browser.post("/admin/auth/group/add/", {"name": "planted", "csrfmiddlewaretoken": token})
        assert response.status_code in (302, 403), response.status_code
        if response.status_code == 302:  # not logged in to alpha: sent to the login page
            assert response["Location"].startswith("/admin/login/")
    # the victim, logged in, with the sibling's cookie and token beside their own session
    victim = strict_client(tenant_a)
    log_in(victim, "victim")
    victim.cookies[settings.CSRF_COOKIE_NAME] = FORGED
    for token in (sibling_token, anonymous_token, FORGED):
        assert (
            victim.post(
                "/admin/auth/group/add/", {"name": "planted", "csrfmiddlewaretoken": token}
            ).status_code
            == 403
        )
    assert not group_exists(tenant_a, "planted") and not group_exists(tenant_b, "planted")
