"""The OpenAPI document and the pages that show it (Swagger UI at ``/api/v1/docs``, Redoc at
``/api/v1/redoc``), served from the project's static files, no CDN.

The document is what the code declares, so it cannot change while a process runs: ``SchemaView``
generates it once per process, format, language, version and OpenAPI version (a deploy starts new
processes) and answers later requests with the same bytes, an ``ETag`` (a revisit is a 304) and
gzip when the client takes it. Generating it costs hundreds of milliseconds and rendering YAML
more; each UI page fetches it on every visit.

The contract is the OpenAPI 3.1 document (``/api/v1/schema``). Swagger UI reads its OpenAPI 3.0.3
rendition (``?oas=3.0``: the same operations and shapes, nullability written as ``nullable``): its
3.1 code path takes seconds of the browser's time for this document where 3.0 takes a fraction
(docs/decisions/0086-api-docs-page.md). Redoc reads the 3.1 document."""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from django.http import HttpResponse
from django.utils.cache import get_conditional_response, patch_cache_control
from django.utils.decorators import method_decorator
from django.views.decorators.gzip import gzip_page
from drf_spectacular.plumbing import set_query_parameters
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.request import Request

UI_OAS = "3.0"  # ``?oas=`` of the rendition Swagger UI reads
_rendered: dict[tuple[str, ...], tuple[bytes, str, str]] = {}
_lock = threading.Lock()


def schema_cache_clear() -> None:
    """Forget the rendered documents (a test that changes what the schema declares calls it)."""
    with _lock:
        _rendered.clear()


@method_decorator(gzip_page, name="dispatch")
class SchemaView(SpectacularAPIView):
    """GET: the OpenAPI 3.1 document (YAML by default, JSON for ``Accept:
    application/vnd.oai.openapi+json`` or ``application/json``; ``?oas=3.0``: its OpenAPI 3.0.3
    rendition), rendered once per process for each (media type, ``lang``, ``version``, ``oas``) and
    answered with an ``ETag``; a matching ``If-None-Match`` gets a 304."""

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Any:
        if request.GET.get("oas") == UI_OAS:
            self.custom_settings = {"OAS_VERSION": "3.0.3"}
        # one at a time: drf-spectacular applies ``custom_settings`` to its process-wide settings
        # while it generates (a cached document is answered at once)
        with _lock:
            return super().get(request, *args, **kwargs)

    def _get_schema_response(self, request: Request) -> HttpResponse:
        key = (
            request.accepted_media_type or "",
            request.GET.get("lang", ""),
            request.GET.get("version", ""),
            "3.0" if self.custom_settings else "",
        )
        cached = _rendered.get(key)
        if cached is None:
            cached = _rendered[key] = self._render(request)
        body, content_type, disposition = cached
        etag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'
        response = get_conditional_response(request, etag=etag) or HttpResponse(
            body, content_type=content_type
        )
        response["ETag"] = etag
        response["Content-Disposition"] = disposition
        patch_cache_control(response, no_cache=True)  # revalidate each time: a 304 costs nothing
        return response

    def _render(self, request: Request) -> tuple[bytes, str, str]:
        """The document as the negotiated renderer writes it: (body, content type, disposition)."""
        response = super()._get_schema_response(request)
        renderer: Any = request.accepted_renderer
        context = {"request": request, "response": response, "view": self}
        body = renderer.render(response.data, request.accepted_media_type, context)
        charset = f"; charset={renderer.charset}" if renderer.charset else ""
        return bytes(body), f"{request.accepted_media_type}{charset}", response["Content-Disposition"]


# the doc pages load everything from this host: the UIs' files are the project's static files, and
# what a bundle would fetch from elsewhere (Redoc's footer logo from cdn.redoc.ly) is refused
PAGE_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:"
)


class _OwnFilesOnly:
    """The page's answer carries ``PAGE_POLICY`` as its Content-Security-Policy."""

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        response["Content-Security-Policy"] = PAGE_POLICY
        return response


class SwaggerView(_OwnFilesOnly, SpectacularSwaggerView):
    """Swagger UI over the document's OpenAPI 3.0.3 rendition (``SchemaView``, ``?oas=3.0``), on a
    page that names its language and darkens Swagger UI's low-contrast colours."""

    template_name = "api/swagger_ui.html"

    def _get_schema_url(self, request: Request) -> str:
        return str(set_query_parameters(super()._get_schema_url(request), oas=UI_OAS))


class RedocView(_OwnFilesOnly, SpectacularRedocView):
    """Redoc without the web fonts its stock page loads from Google (a CDN call on every visit,
    which a network without internet access waits on), on a page that names its language."""

    template_name = "api/redoc.html"
