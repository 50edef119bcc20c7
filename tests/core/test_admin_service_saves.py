"""An admin add or change form whose save goes through a service: when the service refuses, the
person sees the form again with the service's message, and nothing of the attempt stays: no row, no
"added successfully", no ``LogEntry``, no event in the trail (issue 28, item 11).

The walk finds the admins from the tenant admin's registry: every ModelAdmin that overrides
``save_model`` must save through ``core.admin.ServiceSaveAdmin.service_save`` (so an admin added
later is walked too), and each is made to refuse, with a ``DomainError`` and with Django's
``ValidationError`` (what a service's ``full_clean`` raises). The refusals services really make
are tried beside it, without any stand-in.
"""

from __future__ import annotations

from collections.abc import Callable
from html.parser import HTMLParser

import pytest
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.db.models import Model
from django.test import Client
from django_tenants.utils import tenant_context

from agents.models import Agent, ApiKey
from compliance.models import LegalHold, RetentionRule
from core.errors import InvalidInput
from memory.episodic.models import Event
from memory.models import Predicate, SemanticMemory, Skill
from tenants.models import Tenant
from tests.core.test_admin_permissions import logged_in, tenant_door
from tests.factories import Caller, requires_model

REFUSAL = "Refused by the walk: nothing may stay of this attempt."


class FormValues(HTMLParser):
    """The values a browser would post from the first ``<form>`` with ``id`` ending in ``_form`` of
    an admin page: inputs (checked boxes only), selected options, textareas; the inline management
    forms among them."""

    def __init__(self) -> None:
        super().__init__()
        self.values: list[tuple[str, str]] = []
        self._in_form = False
        self._select: str | None = None
        self._select_first: str | None = None
        self._selected = False
        self._textarea: str | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form" and a.get("id", "").endswith("_form"):
            self._in_form = True
        if not self._in_form:
            return
        name = a.get("name", "")
        if tag == "input" and name and a.get("type") not in ("submit", "button", "file"):
            if a.get("type") in ("checkbox", "radio") and "checked" not in a:
                return
            self.values.append((name, a.get("value", "on" if a.get("type") == "checkbox" else "")))
        elif tag == "select" and name:
            self._select, self._select_first, self._selected = name, None, False
        elif tag == "option" and self._select is not None:
            if self._select_first is None:
                self._select_first = a.get("value", "")
            if "selected" in a:
                self.values.append((self._select, a.get("value", "")))
                self._selected = True
        elif tag == "textarea" and name:
            self._textarea, self._text = name, ""

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._in_form = False
        elif tag == "select" and self._select is not None:
            self._select = None
        elif tag == "textarea" and self._textarea is not None:
            self.values.append((self._textarea, self._text.lstrip("\n")))
            self._textarea = None


def form_data(client: Client, url: str, overrides: dict[str, object]) -> dict[str, object]:
    """What the admin form at ``url`` posts as it is shown, with ``overrides``."""
    page = client.get(url)
    assert page.status_code == 200, (url, page.status_code)
    parser = FormValues()
    parser.feed(page.content.decode())
    data: dict[str, object] = {}
    for name, value in parser.values:
        if name == "csrfmiddlewaretoken":
            continue
        if name in data:
            previous = data[name]
            data[name] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            data[name] = value
    data.update(overrides)
    return data


# a valid add form of each service-backed admin, beyond the page's own initial values
ADD_FORMS: dict[type[Model], Callable[[Caller], dict[str, object]]] = {
    Agent: lambda _: {"name": "walker-agent", "role": "critic"},
    ApiKey: lambda caller: {"agent": str(caller.agent.pk), "name": "walker key", "scopes": ["read"]},
    User: lambda _: {
        "username": "walker-user",
        "usable_password": "true",
        "password1": "Walker-pw-98765",
        "password2": "Walker-pw-98765",
    },
    Group: lambda _: {"name": "walker group"},
    RetentionRule: lambda _: {"layer": "episodic", "memory_type": "", "keep_days": "400"},
    LegalHold: lambda _: {"kind": "session", "value": "s-walker", "reason": "walker"},
    Skill: lambda _: {"name": "walker-skill", "title": "Walker", "description": "d", "intents_lines": "walk"},
    Predicate: lambda _: {"name": "walked_by", "cardinality": "one"},
}
# service-backed admins that add nothing: their change form is posted back as it is shown
CHANGE_FORMS: dict[type[Model], Callable[[Caller], Model]] = {
    SemanticMemory: lambda caller: SemanticMemory.objects.filter(agent=caller.agent).first(),  # type: ignore[dict-item]
}


def service_backed() -> dict[type[Model], admin.ModelAdmin]:  # type: ignore[type-arg]
    """The tenant admin's ModelAdmins whose save is their own (not Django's ``obj.save()``)."""
    return {
        model: model_admin
        for model, model_admin in admin.site._registry.items()
        if type(model_admin).save_model is not admin.ModelAdmin.save_model
    }


def test_every_admin_with_its_own_save_saves_through_a_service_that_may_refuse() -> None:
    from core.admin import ServiceSaveAdmin  # imported here: the walk names what lacks it

    found = service_backed()
    direct = sorted(
        type(model_admin).__name__
        for model_admin in found.values()
        if not isinstance(model_admin, ServiceSaveAdmin)
        or type(model_admin).save_model is not ServiceSaveAdmin.save_model
    )
    assert not direct, f"these admins override save_model instead of ServiceSaveAdmin.service_save: {direct}"
    assert set(found) == set(ADD_FORMS) | set(CHANGE_FORMS), "give the walk a form for each"


def counts(tenant: Tenant, model: type[Model]) -> tuple[int, int, int]:
    with tenant_context(tenant):
        return model._default_manager.count(), LogEntry.objects.count(), Event.objects.count()


def assert_refused(client: Client, url: str, data: dict[str, object], message: str, label: str) -> None:
    """POST ``data`` to ``url``: the form comes back with ``message`` and without a success message."""
    response = client.post(url, data)
    html = response.content.decode()
    assert response.status_code == 200, f"{label}: {response.status_code} {response.get('Location', '')}"
    assert message in html, f"{label}: the refusal is not on the form"
    assert "successfully" not in html, f"{label}: a success message beside the refusal"


@requires_model
@pytest.mark.parametrize(
    "refusal",
    [InvalidInput(REFUSAL), ValidationError(REFUSAL)],
    ids=["DomainError", "ValidationError"],
)
def test_a_refused_save_shows_the_error_and_leaves_nothing(
    alice: Caller, monkeypatch: pytest.MonkeyPatch, refusal: Exception
) -> None:
    door = tenant_door(alice.tenant)
    created = alice.post("/api/v1/memories", {"content": "Alice prefers tea to coffee."})
    assert created.status_code == 201, created.content
    with tenant_context(alice.tenant):
        User.objects.create_superuser("root", "root@example.com", "pw-123456789")
    client = logged_in(door, "root")

    def refuse(*args: object, **kwargs: object) -> None:
        raise refusal

    for model, model_admin in service_backed().items():
        opts = model._meta
        prefix = f"{opts.app_label}_{opts.model_name}"
        if model in ADD_FORMS:
            url = door.url(f"{prefix}_add")
            data = form_data(client, url, ADD_FORMS[model](alice))
        else:
            with tenant_context(alice.tenant):
                obj = CHANGE_FORMS[model](alice)
            url = door.url(f"{prefix}_change", object_id=str(obj.pk))
            data = form_data(client, url, {})
        before = counts(alice.tenant, model)
        monkeypatch.setattr(model_admin, "service_save", refuse, raising=False)
        assert_refused(client, url, data, REFUSAL, opts.label)
        monkeypatch.undo()
        assert counts(alice.tenant, model) == before, f"{opts.label}: the refused attempt left rows"
        after = client.get(door.url(f"{prefix}_changelist")).content.decode()
        assert "successfully" not in after, f"{opts.label}: a success message after the refusal"
        if model in ADD_FORMS:  # and the same form, not refused, saves (the walk's forms are valid)
            response = client.post(url, data)
            assert response.status_code == 302, (opts.label, response.content.decode()[:2000])
            assert counts(alice.tenant, model)[0] == before[0] + 1, opts.label


def test_an_invalid_retention_rule_is_refused_on_the_form(alice: Caller) -> None:
    """The case of the issue: the form accepts the fields, the service refuses the combination."""
    door = tenant_door(alice.tenant)
    with tenant_context(alice.tenant):
        User.objects.create_superuser("root", "root@example.com", "pw-123456789")
    client = logged_in(door, "root")
    url = door.url("compliance_retentionrule_add")
    before = counts(alice.tenant, RetentionRule)
    for data, message in (
        ({"layer": "episodic", "memory_type": "fact", "keep_days": "30"}, "has no type"),
        ({"layer": "summaries", "memory_type": "", "keep_days": "30"}, "are kept by"),
    ):
        response = client.post(url, data)
        html = response.content.decode()
        assert response.status_code == 200, (data, response.status_code)
        assert message in html and "errorlist" in html, data
        assert "added successfully" not in html
        assert counts(alice.tenant, RetentionRule) == before, data
    assert "successfully" not in client.get(door.url("compliance_retentionrule_changelist")).content.decode()
    # the field the service names carries the message
    response = client.post(url, {"layer": "episodic", "memory_type": "fact", "keep_days": "30"})
    assert "fact" in str(response.context["adminform"].form.errors.get("memory_type", ""))
