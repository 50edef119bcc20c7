"""Scope checks for API keys."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework.permissions import SAFE_METHODS, BasePermission

from .models import ApiKey

if TYPE_CHECKING:
    from rest_framework.request import Request
    from rest_framework.views import APIView


class HasScope(BasePermission):
    """Allow an authenticated agent whose key has the scope the view needs.

    A view may set ``required_scope``; otherwise reads (GET, HEAD, OPTIONS) need ``read`` and
    everything else ``write``. No credentials → 401 (via ``NotAuthenticated``); a missing scope → 403.
    """

    message = "This API key lacks the required scope."

    def has_permission(self, request: Request, view: APIView) -> bool:
        api_key = request.auth
        if not isinstance(api_key, ApiKey):
            return False
        scope = getattr(view, "required_scope", None) or (
            "read" if request.method in SAFE_METHODS else "write"
        )
        if not api_key.has_scope(scope):
            self.message = f"This API key lacks the '{scope}' scope."
            return False
        return True
