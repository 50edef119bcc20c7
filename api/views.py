"""The base class of every API view, and the views that answer errors (404, 500, CSRF) as JSON."""

from __future__ import annotations

import sys
from typing import Any, ClassVar

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.views import APIView

from agents.models import Agent, ApiKey
from api.exceptions import error_response, flatten_errors, unavailable_response
from api.parameters import check_parameters
from tenants.models import Tenant


class AgentRequest(Request):
    """What every API view receives once ``ApiKeyAuthentication`` has run: the agent as ``user``, its
    key as ``auth`` and the key's tenant as ``tenant`` (a type for annotations; at run time the
    request is DRF's own)."""

    user: Agent  # type: ignore[assignment]  # DRF's stubs type it as Django's User
    auth: ApiKey
    tenant: Tenant


class ApiView(APIView):
    """An ``APIView`` that answers a method it does not implement 405, then refuses query
    parameters it does not know (400 naming each one), and NUL
    characters or malformed client-chosen ids in any parameter (``api.parameters``), before its
    handler runs.

    ``get_query_params``: the names a GET accepts (every other method accepts none);
    ``delete_query_params``: the names a DELETE accepts; ``repeatable_query_params``: those that may
    appear more than once (``?kind=a&kind=b``).
    """

    get_query_params: ClassVar[frozenset[str]] = frozenset()
    delete_query_params: ClassVar[frozenset[str]] = frozenset()
    repeatable_query_params: ClassVar[frozenset[str]] = frozenset()

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        method = (request.method or "").lower()
        if method not in self.http_method_names or not hasattr(self, method):
            # before the query string is judged: a method the view lacks is a 405 whatever it holds
            self.http_method_not_allowed(request, *args, **kwargs)
        check_parameters(kwargs, dict(request.query_params.lists()))
        if request.method in ("GET", "HEAD"):
            allowed = self.get_query_params
        elif request.method == "DELETE":
            allowed = self.delete_query_params
        else:
            allowed = frozenset()
        errors: dict[str, list[str]] = {}
        for name in request.query_params:
            if name not in allowed:
                errors[name] = ["Unknown query parameter."]
            elif name not in self.repeatable_query_params and len(request.query_params.getlist(name)) > 1:
                errors[name] = ["Given more than once."]
        if errors:
            raise serializers.ValidationError(errors)

    def query(
        self, params_class: type[serializers.Serializer], raw: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The request's query parameters validated by ``params_class`` (``raw``: the values to
        validate, when some are lists). Errors are keyed by parameter name (``kind``), whatever the
        parameter's inner structure."""
        params = params_class(data=self.request.query_params.dict() if raw is None else raw)
        if not params.is_valid():
            errors = {
                name: [m for messages in flatten_errors(detail, name).values() for m in messages]
                for name, detail in params.errors.items()
            }
            raise serializers.ValidationError(errors)
        return dict(params.validated_data)


@csrf_exempt  # an API path: a POST to it is answered 404 like a GET, never a CSRF page
def api_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """JSON 404 for any ``/api/v1/`` path that matches no endpoint (or whose id has the wrong form)."""
    return error_response("No such endpoint or resource.", "not_found", status=404, field="path")


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler404``: the API's JSON 404 for API paths no pattern matched, Django's page elsewhere."""
    if _is_api(request):
        return error_response("No such endpoint or resource.", "not_found", status=404, field="path")
    return defaults.page_not_found(request, exception or Exception("not found"))


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: a JSON body for API paths (no traceback, whatever ``DEBUG`` says of pages),
    Django's plain page elsewhere; a 503 when the error is PostgreSQL being unavailable
    (``api.exceptions.unavailable_response``, for errors outside views such as a middleware's). The
    error itself is logged by Django's request handler."""
    error = sys.exc_info()[1]  # Django calls this while handling the error
    if error is not None and (answer := unavailable_response(request, error)) is not None:
        return answer
    if _is_api(request):
        return error_response("Internal server error; it has been logged.", "server_error", status=500)
    return defaults.server_error(request)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW``: API clients authenticate with keys, so a CSRF refusal there is JSON."""
    if _is_api(request):
        return error_response("Forbidden (CSRF check failed).", "permission_denied", status=403)
    from django.views.csrf import csrf_failure as django_csrf_failure

    return django_csrf_failure(request, reason=reason)
