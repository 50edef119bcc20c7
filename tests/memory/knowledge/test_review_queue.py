"""The knowledge admin: the contradiction review queue (htmx), its permissions, and the pages of
facts, predicates and entities. Django's test client on the tenant host ``alpha.localhost``."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django_tenants.utils import tenant_context

from memory.episodic.models import Event, EventKind
from memory.episodic.selectors import chain_verify
from memory.knowledge import services
from memory.knowledge.models import Cardinality, Contradiction, Fact, FactStatus, Predicate
from memory.knowledge.services import FactData, FactObject
from tenants.models import Tenant
from tests.factories import (
    HTMX,
    PASSWORD,
    QUEUE,
    Caller,
    admin_client,
    conflict_make,
    open_count,
    resolve_url,
    rows,
    staff_user,
)


def test_tenants_get_the_review_groups_with_their_permissions(tenant_a: Tenant) -> None:
    with tenant_context(tenant_a):
        operator = {p.codename for p in Group.objects.get(name="operator").permissions.all()}
        officer = {p.codename for p in Group.objects.get(name="compliance officer").permissions.all()}
    assert {"resolve_contradiction", "view_contradiction", "view_fact", "change_cardinality"} <= operator
    assert {"view_contradiction", "view_fact", "view_factprovenance", "view_entity"} <= officer
    assert not officer & {"resolve_contradiction", "change_predicate", "change_cardinality", "change_fact"}


def test_queue_lists_open_contradictions_with_provenance(alice: Caller, bob: Caller) -> None:
    with tenant_context(alice.tenant):
        conflict = conflict_make(alice.agent, bob.agent)
        closed = conflict_make(alice.agent, bob.agent, subject="Carol", old="Initech", new="Hooli")
        services.contradiction_resolve(
            contradiction_id=closed.contradiction.pk, resolution="dismiss", reviewer="earlier"
        )
    client = admin_client(alice.tenant, "op", group="operator")
    page = client.get(QUEUE).content.decode()
    assert rows(page) == [conflict.contradiction.pk]  # the dismissed one is not in the queue
    assert open_count(page) == 1
    for text in [
        "Alice",
        "works_at",
        "Acme",
        "Globex",
        "alice",
        "bob",
        "s-onboarding",
        "s-review",
        "0.70",
        "0.90",
        "Alice told me they joined Acme in March.",
        "Alice&#x27;s new badge says Globex.",
    ]:
        assert text in page, text
    for resolution in ("accept_new", "keep_existing", "both_valid", "dismiss"):
        assert f'data-resolution="{resolution}"' in page
    # htmx is served from the project, not a CDN, and the CSRF token travels in hx-headers
    assert "/static/vendor/htmx/htmx.min.js" in page and "X-CSRFToken" in page
    # the same view refreshes just the list for htmx, with the count out of band
    fragment = client.get(QUEUE, **HTMX).content.decode()
    assert "<html" not in fragment and fragment.lstrip().startswith('<div id="queue-list">')
    assert rows(fragment) == [conflict.contradiction.pk] and open_count(fragment) == 1


def test_queue_needs_a_fixed_number_of_queries(alice: Caller, bob: Caller) -> None:
    client = admin_client(alice.tenant, "op", group="operator")

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(QUEUE).status_code == 200
        return len(captured)

    with tenant_context(alice.tenant):
        conflict_make(alice.agent, bob.agent, subject="S0")
    few = queries()
    with tenant_context(alice.tenant):
        for i in range(1, 6):
            conflict_make(alice.agent, bob.agent, subject=f"S{i}")
    assert queries() == few


@pytest.mark.parametrize(
    ("resolution", "existing_status", "new_status", "status"),
    [
        ("accept_new", FactStatus.SUPERSEDED, FactStatus.ACTIVE, "resolved"),
        ("keep_existing", FactStatus.ACTIVE, FactStatus.RETRACTED, "resolved"),
        ("both_valid", FactStatus.ACTIVE, FactStatus.ACTIVE, "resolved"),
        ("dismiss", FactStatus.ACTIVE, FactStatus.ACTIVE, "dismissed"),  # not a contradiction: both stand
    ],
)
def test_htmx_post_resolves_and_answers_with_a_fragment(
    alice: Caller, bob: Caller, resolution: str, existing_status: str, new_status: str, status: str
) -> None:
    with tenant_context(alice.tenant):
        conflict = conflict_make(alice.agent, bob.agent)
        other = conflict_make(
            alice.agent, bob.agent, subject="Dave", predicate="lives_in", old="Oslo", new="Rome"
        )
    client = admin_client(alice.tenant, "op", group="operator")
    cid = conflict.contradiction.pk
    assert open_count(client.get(QUEUE).content.decode()) == 2

    response = client.post(resolve_url(cid), {"resolution": resolution, "note": "checked HR"}, **HTMX)

    assert response.status_code == 200
    fragment = response.content.decode()
    assert "<html" not in fragment  # a fragment, not a page
    assert cid not in rows(fragment)  # the row is replaced by nothing: it leaves the queue
    assert (
        open_count(fragment) == 1 and 'id="queue-summary" class="cq-summary" hx-swap-oob="true"' in fragment
    )
    assert 'hx-swap-oob="afterbegin:#queue-log"' in fragment
    with tenant_context(alice.tenant):
        contradiction = Contradiction.objects.get(pk=cid)
        assert (contradiction.status, contradiction.resolution) == (status, resolution)
        assert (contradiction.reviewer, contradiction.note) == ("op", "checked HR")
        assert contradiction.resolved_at is not None
        existing, new = Fact.objects.get(pk=conflict.existing.pk), Fact.objects.get(pk=conflict.new.pk)
        assert (existing.status, new.status) == (existing_status, new_status)
        if resolution == "accept_new":
            assert existing.valid_to == new.valid_from
        expected_cardinality = Cardinality.MANY if resolution == "both_valid" else Cardinality.ONE
        assert Predicate.objects.get(name="works_at").cardinality == expected_cardinality
        decision = Event.objects.filter(kind=EventKind.DECISION).latest("seq")
        assert decision.payload["action"] == "contradiction_resolve"
        assert decision.payload["contradiction_id"] == cid
        assert decision.payload["resolution"] == resolution and decision.payload["reviewer"] == "op"
        assert decision.agent.role == "system"  # the tenant's system agent records admin decisions
        # the unrelated contradiction is untouched
        assert Contradiction.objects.get(pk=other.contradiction.pk).status == "open"
    assert rows(client.get(QUEUE).content.decode()) == [other.contradiction.pk]


def test_accepting_moves_the_other_contradictions_in_the_same_fragment(alice: Caller, bob: Caller) -> None:
    with tenant_context(alice.tenant):
        first = conflict_make(alice.agent, bob.agent)  # Acme (active) vs Globex
        third = services.fact_assert(
            agent=bob.agent,
            data=FactData(subject="Alice", predicate="works_at", object=FactObject(entity="Initech")),
        )
        assert third.contradiction is not None  # Acme vs Initech
    client = admin_client(alice.tenant, "op", group="operator")

    response = client.post(resolve_url(first.contradiction.pk), {"resolution": "accept_new"}, **HTMX)

    fragment = response.content.decode()
    with tenant_context(alice.tenant):
        moved = Contradiction.objects.get(existing_fact=first.new, new_fact=third.fact)
        assert Contradiction.objects.get(pk=third.contradiction.pk).status == "dismissed"
    # the dismissed row is deleted out of band and the moved one (Globex vs Initech) appended
    assert f'<article id="contradiction-{third.contradiction.pk}" hx-swap-oob="delete">' in fragment
    assert 'hx-swap-oob="beforeend:#queue-list"' in fragment and rows(fragment) == [moved.pk]
    assert open_count(fragment) == 1


def test_plain_form_post_works_without_javascript(alice: Caller, bob: Caller) -> None:
    with tenant_context(alice.tenant):
        conflict = conflict_make(alice.agent, bob.agent)
    client = admin_client(alice.tenant, "op", group="operator")
    response = client.post(
        resolve_url(conflict.contradiction.pk), {"resolution": "keep_existing"}, follow=True
    )
    assert response.redirect_chain[-1][0] == QUEUE
    assert "kept the existing fact" in response.content.decode()
    assert client.get(resolve_url(conflict.contradiction.pk)).status_code == 405
    with tenant_context(alice.tenant):
        assert Contradiction.objects.get(pk=conflict.contradiction.pk).resolution == "keep_existing"


def test_compliance_officer_can_look_but_not_act(alice: Caller, bob: Caller) -> None:
    with tenant_context(alice.tenant):
        conflict = conflict_make(alice.agent, bob.agent)
    officer = admin_client(alice.tenant, "officer", group="compliance officer")
    page = officer.get(QUEUE)
    assert page.status_code == 200
    html = page.content.decode()
    assert rows(html) == [conflict.contradiction.pk] and "Globex" in html
    assert "data-resolution" not in html and "hx-post" not in html and "View only" in html

    denied = officer.post(resolve_url(conflict.contradiction.pk), {"resolution": "accept_new"}, **HTMX)
    assert denied.status_code == 403 and "not resolve" in denied.content.decode()
    assert (
        officer.post(resolve_url(conflict.contradiction.pk), {"resolution": "accept_new"}).status_code == 403
    )
    # the fact's history can be read; predicates cannot be changed
    assert officer.get(f"/admin/memory/fact/{conflict.new.pk}/change/").status_code == 200
    with tenant_context(alice.tenant):
        predicate = Predicate.objects.get(name="works_at")
        assert Contradiction.objects.get(pk=conflict.contradiction.pk).status == "open"
    change = officer.post(
        f"/admin/memory/predicate/{predicate.pk}/change/", {"cardinality": "many", "description": "x"}
    )
    assert change.status_code == 403
    # a staff user with no group at all cannot even look
    nobody = admin_client(alice.tenant, "nobody")
    assert nobody.get(QUEUE).status_code == 403


def test_another_tenants_admin_cannot_see_or_resolve_alphas_queue(
    alice: Caller, bob: Caller, tenant_b: Tenant
) -> None:
    with tenant_context(alice.tenant):
        conflict = conflict_make(alice.agent, bob.agent, old="Secret Alpha Corp")
    outsider = admin_client(tenant_b, "root-beta", superuser=True)
    beta_queue = outsider.get(QUEUE).content.decode()
    assert "Secret Alpha Corp" not in beta_queue and open_count(beta_queue) == 0

    # alpha's contradiction id on beta's host is simply unknown there
    unknown = outsider.post(resolve_url(conflict.contradiction.pk), {"resolution": "accept_new"}, **HTMX)
    assert (
        unknown.status_code == 404
        and f"No contradiction {conflict.contradiction.pk}" in unknown.content.decode()
    )
    # beta's session means nothing on alpha's host: alpha has its own users and sessions
    attempt = outsider.post(
        resolve_url(conflict.contradiction.pk),
        {"resolution": "accept_new"},
        HTTP_HOST="alpha.localhost",
        **HTMX,
    )
    # htmx is sent to the login page as a whole (HX-Redirect), not given it to swap into the row
    assert attempt.status_code == 200 and attempt["HX-Redirect"].startswith("/admin/login/?next=")
    response = outsider.get(QUEUE, HTTP_HOST="alpha.localhost")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    with tenant_context(alice.tenant):
        assert Contradiction.objects.get(pk=conflict.contradiction.pk).status == "open"


def test_already_resolved_or_bad_input_comes_back_as_a_message(alice: Caller, bob: Caller) -> None:
    with tenant_context(alice.tenant):
        conflict = conflict_make(alice.agent, bob.agent)
        still_open = conflict_make(alice.agent, bob.agent, subject="Erin", old="Umbrella", new="Tyrell")
    client = admin_client(alice.tenant, "op", group="operator")
    cid = conflict.contradiction.pk

    bad = client.post(resolve_url(cid), {"resolution": "flip_a_coin"}, **HTMX)
    assert bad.status_code == 400
    html = bad.content.decode()
    assert "Unknown resolution" in html and rows(html) == [cid] and 'data-resolution="accept_new"' in html

    too_long = client.post(resolve_url(cid), {"resolution": "dismiss", "note": "x" * 2001}, **HTMX)
    assert too_long.status_code == 400 and "2000 characters" in too_long.content.decode()

    # someone else decides first, in another browser
    with tenant_context(alice.tenant):
        services.contradiction_resolve(contradiction_id=cid, resolution="keep_existing", reviewer="grace")
    late = client.post(resolve_url(cid), {"resolution": "accept_new"}, **HTMX)
    assert late.status_code == 409
    html = late.content.decode()
    assert (
        "already resolved" in html
        and "grace chose “keep the existing fact" in html
        and 'role="alert"' in html
    )
    assert "data-resolution" not in html  # the closed row has no buttons any more
    assert open_count(html) == 1
    with tenant_context(alice.tenant):
        contradiction = Contradiction.objects.get(pk=cid)
        assert (contradiction.resolution, contradiction.reviewer) == ("keep_existing", "grace")
        assert Contradiction.objects.get(pk=still_open.contradiction.pk).status == "open"

    missing = client.post(resolve_url(999_999), {"resolution": "dismiss"}, **HTMX)
    assert missing.status_code == 404 and "No contradiction 999999" in missing.content.decode()
    plain = client.post(resolve_url(cid), {"resolution": "accept_new"}, follow=True)
    assert plain.status_code == 200 and "already resolved" in plain.content.decode()


def test_fact_page_shows_its_history(alice: Caller, bob: Caller) -> None:
    with tenant_context(alice.tenant):
        conflict = conflict_make(alice.agent, bob.agent)
        services.fact_assert(  # bob reinforces the existing fact
            agent=bob.agent,
            data=FactData(
                subject="alice", predicate="works_at", object=FactObject(entity="ACME"), session_id="s-later"
            ),
        )
        services.contradiction_resolve(
            contradiction_id=conflict.contradiction.pk,
            resolution="accept_new",
            reviewer="grace",
            note="badge",
        )
    client = admin_client(alice.tenant, "officer", group="compliance officer")
    response = client.get(f"/admin/memory/fact/{conflict.existing.pk}/change/")
    assert response.status_code == 200
    page = response.content.decode()
    for text in ["s-onboarding", "s-later", "Alice told me they joined Acme in March.", "superseded"]:
        assert text in page, text
    assert "grace" in page and "badge" in page and "accept the new fact" in page
    # read-mostly: no add, change or delete of facts
    assert client.get("/admin/memory/fact/add/").status_code == 403
    assert client.post(f"/admin/memory/fact/{conflict.existing.pk}/delete/").status_code == 403
    facts = client.get("/admin/memory/fact/").content.decode()
    assert "Globex" in facts and "Acme" in facts


def test_predicate_cardinality_needs_its_permission(alice: Caller, bob: Caller) -> None:
    with tenant_context(alice.tenant):
        conflict_make(alice.agent, bob.agent)
        predicate = Predicate.objects.get(name="works_at")
        editor = staff_user(alice.tenant, "editor")
        editor.user_permissions.add(
            *Permission.objects.filter(codename__in=["view_predicate", "change_predicate"])
        )
    url = f"/admin/memory/predicate/{predicate.pk}/change/"

    # change_predicate alone: the description changes, the cardinality and the name do not
    editor_client = Client(HTTP_HOST="alpha.localhost")
    editor_client.post("/admin/login/", {"username": "editor", "password": PASSWORD})
    form = editor_client.get(url).content.decode()
    assert 'name="description"' in form and 'name="cardinality"' not in form and 'name="name"' not in form
    editor_client.post(url, {"name": "renamed", "cardinality": "many", "description": "employer"})
    with tenant_context(alice.tenant):
        predicate.refresh_from_db()
        assert (predicate.name, predicate.cardinality, predicate.description) == (
            "works_at",
            "one",
            "employer",
        )

    # an operator may change the cardinality too, and is told about the contradictions still open
    operator = admin_client(alice.tenant, "op", group="operator")
    response = operator.post(url, {"cardinality": "many", "description": "employer"}, follow=True)
    assert "1 open contradiction(s) on it stay in the review queue" in response.content.decode()
    with tenant_context(alice.tenant):
        predicate.refresh_from_db()
        assert predicate.cardinality == "many"


def test_entities_are_listed_with_their_aliases(alice: Caller, bob: Caller) -> None:
    with tenant_context(alice.tenant):
        conflict_make(alice.agent, bob.agent)
        services.fact_assert(
            agent=bob.agent,
            data=FactData(
                subject="ALICE", predicate="age", object=FactObject(literal_type="number", value=34)
            ),
        )
    client = admin_client(alice.tenant, "officer", group="compliance officer")
    page = client.get("/admin/memory/entity/", {"q": "alice"}).content.decode()
    assert "ALICE" in page  # the other spelling, kept as an alias
    assert client.get("/admin/memory/entity/add/").status_code == 403


def test_a_predicate_changed_in_the_admin_is_in_the_trail_with_its_person(alice: Caller, bob: Caller) -> None:
    with tenant_context(alice.tenant):
        conflict_make(alice.agent, bob.agent)
        predicate = Predicate.objects.get(name="works_at")
        before = Event.objects.count()
    url = f"/admin/memory/predicate/{predicate.pk}/change/"
    operator = admin_client(alice.tenant, "op", group="operator")
    operator.post(url, {"cardinality": "many", "description": "employer"})
    operator.post(url, {"cardinality": "many", "description": "employer"})  # no change: no event
    with tenant_context(alice.tenant):
        # the operator's login is in the trail too (compliance); here the predicate edits
        decisions = list(
            Event.objects.filter(seq__gt=before).exclude(payload_index__action="login").order_by("seq")
        )
        assert len(decisions) == 1
        event = decisions[0]
        assert (event.kind, event.actor, event.session_id) == ("decision", "user:op", "admin:op")
        assert event.payload == {
            "action": "predicate_update",
            "predicate": "works_at",
            "changes": {"cardinality": ["one", "many"], "description": ["", "employer"]},
        }
        assert chain_verify().ok
