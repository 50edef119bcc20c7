"""``/api/v1/me``: the caller itself."""

from __future__ import annotations

from rest_framework.response import Response

from api.views import AgentRequest, ApiView


class WhoAmIView(ApiView):
    """``GET /api/v1/me``: the agent, tenant and scopes behind the presented key."""

    def get(self, request: AgentRequest) -> Response:
        key = request.auth
        return Response(
            {
                "agent": request.user.name,
                "role": request.user.role,
                "tenant": request.tenant.schema_name,
                "key_id": key.key_id,
                "scopes": key.scopes,
            }
        )
