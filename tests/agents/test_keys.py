"""API keys: a deactivated agent (the system agent among them) is never given one."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django_tenants.utils import tenant_context

from agents.models import Agent, ApiKey
from agents.services import agent_create, api_key_create, system_agent_get
from core.errors import InvalidInput


def test_no_key_for_a_deactivated_agent(tenant_a) -> None:  # type: ignore[no-untyped-def]
    with tenant_context(tenant_a):
        retired = agent_create(by=None, name="retired", is_active=False)
        for agent in (retired, system_agent_get()):
            with pytest.raises(InvalidInput) as refused:
                api_key_create(by=None, agent=agent)
            assert refused.value.field == "agent" and "deactivated" in refused.value.message
        assert not ApiKey.objects.filter(agent__is_active=False).exists()


def test_the_command_refuses_too(tenant_a) -> None:  # type: ignore[no-untyped-def]
    with tenant_context(tenant_a):
        agent_create(by=None, name="retired-2", is_active=False)
    with pytest.raises(CommandError, match="deactivated"):
        call_command("api_key_create", tenant="alpha", agent="retired-2", stdout=io.StringIO())
    with tenant_context(tenant_a):
        assert not ApiKey.objects.filter(agent=Agent.objects.get(name="retired-2")).exists()


def test_the_command_binds_a_key_to_an_end_user(tenant_a) -> None:  # type: ignore[no-untyped-def]
    out = io.StringIO()
    call_command("api_key_create", tenant="alpha", agent="support-cli", data_subject="ana", stdout=out)
    with tenant_context(tenant_a):
        key = ApiKey.objects.select_related("agent").get(key_id=out.getvalue().strip().split(".")[2])
    assert key.data_subject == "ana" and key.agent.name == "support-cli"
    with pytest.raises(CommandError, match="200 characters"):
        call_command(
            "api_key_create", tenant="alpha", agent="support-cli", data_subject="x" * 201, stdout=out
        )
