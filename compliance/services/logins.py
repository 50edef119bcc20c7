"""Logins to the tenant's admin, succeeded or failed, recorded in the trail."""

from __future__ import annotations

from django.db import transaction
from django_tenants.utils import get_public_schema_name

from agents.services import system_agent_get
from core.tenancy import current_schema
from memory.episodic.models import Event
from memory.episodic.services import decision_record, person_session

from .records import person_record


def login_record(*, username: str, succeeded: bool, address: str = "") -> Event | None:
    """Record a login (``succeeded``) or failed login to the current tenant's admin by ``username``
    (as typed, for a failure) from ``address``; nothing outside a tenant (the platform admin)."""
    if current_schema() == get_public_schema_name():
        return None
    name = username[:150]
    with transaction.atomic():
        if succeeded:
            return person_record(
                username=name,
                action="login",
                content=f"{name} logged in to the admin.",
                payload={"address": address},
            )
        return decision_record(
            agent=system_agent_get(),
            session_id=person_session(name),
            actor="anonymous",  # nobody proved who they are: the name is what was typed
            content=f"Failed login to the admin as {name!r}.",
            payload={"action": "login_failed", "username": name, "address": address},
        )
