"""``/api/v1/me``: the caller itself."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from agents.models import Scope
from api.fields import null_if_blank
from api.views import AgentRequest, ApiView


class WhoAmIOutputSerializer(serializers.Serializer):
    agent = serializers.CharField(help_text="the agent's name")
    role = serializers.CharField(allow_null=True, help_text="planner, researcher, critic...; null if unset")
    tenant = serializers.CharField(help_text="the tenant's slug (its schema)")
    key_id = serializers.CharField(help_text="the public part of the key")
    scopes = serializers.ListField(child=serializers.ChoiceField(choices=Scope.choices))
    data_subject = serializers.CharField(
        allow_null=True,
        help_text="the end user the key is bound to (it reads and writes only theirs); null: unbound",
    )


class WhoAmIView(ApiView):
    """``GET /api/v1/me``: the agent, tenant and scopes behind the presented key."""

    @extend_schema(
        operation_id="me", summary="Who am I", responses={200: WhoAmIOutputSerializer}, tags=["agents"]
    )
    def get(self, request: AgentRequest) -> Response:
        key = request.auth
        body = {
            "agent": request.user.name,
            "role": null_if_blank(request.user.role),
            "tenant": request.tenant.schema_name,
            "key_id": key.key_id,
            "scopes": key.scopes,
            "data_subject": null_if_blank(key.data_subject),
        }
        return Response(WhoAmIOutputSerializer(body).data)
