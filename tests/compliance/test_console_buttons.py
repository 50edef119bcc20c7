"""Every button and link of the screens this round touched, tried by each kind of person: two
compliance officers, an operator and a staff user in no group. Each page's links under ``/admin/``
are followed and each form is submitted with each of its buttons, as the page offers it: nothing
answers 500. Then each form the officers and the operator were offered is posted by the people who
may not act on it (a user in no group; the operator on the officers' forms; an officer on the
operator's): each is refused (403, or the login page) and changes nothing in the trail."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

from django.test import Client
from django.utils import timezone
from django_tenants.utils import tenant_context

from compliance import services
from memory.episodic.models import Event
from memory.procedural.services.runs import RunData, skill_run_report
from tests.factories import (
    Caller,
    admin_client,
    conflict_make,
    requires_model,
    say,
    skill_publish,
    skill_seed,
)

pytestmark = requires_model  # the skill whose run is on the pages is embedded when proposed

SKIP = ("/admin/logout/", "/admin/password_change/")  # leaving the session is not a button of a screen


@dataclass
class Form:
    action: str
    fields: dict[str, str] = field(default_factory=dict)
    buttons: list[tuple[str, str]] = field(default_factory=list)


class Page(HTMLParser):
    """The links and the POST forms (fields with their values as offered, submit buttons) of a page."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.links: set[str] = set()
        self.forms: list[Form] = []
        self._form: Form | None = None
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "a" and a.get("href", "").startswith(("/admin/", "?")):
            self.links.add(urljoin(self.url, a["href"]).split("#")[0])
        elif tag == "form" and a.get("method", "get").lower() == "post":
            self._form = Form(urljoin(self.url, a.get("action") or self.url))
            self.forms.append(self._form)
        elif self._form is None:
            return
        elif tag == "input" and a.get("type") in ("submit", "image") and "disabled" not in a:
            self._form.buttons.append((a.get("name", ""), a.get("value", "")))
        elif tag == "button" and a.get("type", "submit") == "submit" and "disabled" not in a:
            self._form.buttons.append((a.get("name", ""), a.get("value", "")))
        elif (
            tag == "input" and a.get("name") and a.get("type") not in ("submit", "checkbox", "radio", "file")
        ):
            self._form.fields[a["name"]] = a.get("value", "")
        elif tag == "input" and a.get("type") in ("checkbox", "radio") and "checked" in a and a.get("name"):
            self._form.fields[a["name"]] = a.get("value", "on")
        elif tag == "textarea" and a.get("name"):
            self._form.fields[a["name"]] = "checked by the console's button test"
        elif tag == "select" and a.get("name"):
            self._select = a["name"]
            self._form.fields.setdefault(a["name"], "")
        elif tag == "option" and self._select and ("selected" in a or not self._form.fields[self._select]):
            self._form.fields[self._select] = a.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None
        elif tag == "select":
            self._select = None


def _parse(client: Client, url: str) -> tuple[int, Page]:
    response = client.get(url)
    page = Page(url)
    if response.status_code == 200 and response["Content-Type"].startswith("text/html"):
        page.feed(response.content.decode())
    return response.status_code, page


def _trail(tenant: object) -> int:
    with tenant_context(tenant):
        return Event.objects.count()


def test_every_button_of_the_touched_screens_as_each_person(alice: Caller, bob: Caller) -> None:
    skill_seed(alice)
    skill_publish(alice.tenant, "reset-password", 1)
    with tenant_context(alice.tenant):
        say(alice.agent, "s-buttons", "a turn")
        run = skill_run_report(
            agent=alice.agent,
            name="reset-password",
            data=RunData(version=1, success=True, session_id="s-buttons"),
        )
        dispute = conflict_make(alice.agent, bob.agent)
        due = timezone.now().date() + timedelta(days=3)
        holds = [
            services.hold_place(kind="subject", value=f"cust-{i}", reason="r", username="olga", review_by=due)
            for i in range(3)
        ]
        services.hold_release(hold=holds[0], username="olga", reason="asked")
        services.erasure_request(kind="subject", value="cust-x", legal_basis="GDPR", note="", username="olga")
    pages = [
        "/admin/",
        "/admin/compliance/legalhold/",
        "/admin/compliance/legalhold/add/",
        *(f"/admin/compliance/legalhold/{h.pk}/change/" for h in holds),
        *(f"/admin/compliance/legalhold/{h.pk}/release/" for h in holds),
        "/admin/memory/contradiction/queue/",
        f"/admin/memory/contradiction/{dispute.contradiction.pk}/change/",
        "/admin/memory/skillrun/",
        f"/admin/memory/skillrun/{run.pk}/change/",
        "/admin/sessions/?session=s-buttons",
        "/admin/sessions/?session=s-review",
    ]
    people = {
        "olga": admin_client(alice.tenant, "olga", group="compliance officer"),
        "pavel": admin_client(alice.tenant, "pavel", group="compliance officer"),
        "oscar": admin_client(alice.tenant, "oscar", group="operator"),
        "nobody": admin_client(alice.tenant, "nobody"),
    }
    offered: dict[str, list[Form]] = {}
    errors: list[str] = []
    for name, client in people.items():
        for url in pages:
            status, page = _parse(client, url)
            if status >= 500:
                errors.append(f"{name} GET {url}: {status}")
            for link in sorted(page.links - {url}):
                if urlsplit(link).path.startswith(SKIP):
                    continue
                if (got := client.get(link).status_code) >= 500:
                    errors.append(f"{name} GET {link} (from {url}): {got}")
            forms = [f for f in page.forms if not urlsplit(f.action).path.startswith(SKIP)]
            offered.setdefault(name, []).extend(forms)
            for form in forms:
                for button, value in form.buttons or [("", "")]:
                    data = {**form.fields, **({button: value} if button else {})}
                    if (got := client.post(form.action, data).status_code) >= 500:
                        errors.append(f"{name} POST {form.action} [{button}={value}]: {got}")
    assert not errors, "\n".join(errors)
    # the buttons that decide were among those tried
    assert any("review_by" in f.fields and ("_save", "Save") in f.buttons for f in offered["pavel"])
    assert any(f.action.endswith("/release/") for f in offered["pavel"])
    assert any("/resolve/" in f.action and len(f.buttons) == 4 for f in offered["oscar"])
    assert any(f.action.endswith("/chaincheck/run/") for f in offered["olga"])

    # who may not act on a form is refused and the trail does not move
    refusals = {
        "nobody": offered["olga"] + offered["oscar"],
        "oscar": [f for f in offered["olga"] if "/compliance/" in f.action],
        "olga": [f for f in offered["oscar"] if "/resolve/" in f.action],
    }
    assert refusals["oscar"] and refusals["olga"] and refusals["nobody"]
    unguarded: list[str] = []
    for name, forms in refusals.items():
        for form in forms:
            for button, value in form.buttons or [("", "")]:
                before = _trail(alice.tenant)
                response = people[name].post(
                    form.action, {**form.fields, **({button: value} if button else {})}
                )
                refused = response.status_code == 403 or re.search(
                    r"/admin/login/", response.get("Location", "")
                )
                if not refused or _trail(alice.tenant) != before:
                    unguarded.append(f"{name} POST {form.action} [{button}={value}]: {response.status_code}")
    assert not unguarded, "\n".join(unguarded)
