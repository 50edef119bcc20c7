"""The OpenAPI document and its pages: generated once per process and revalidated by ETag, gzip
when asked for, Swagger UI on the document's 3.0.3 rendition (the same operations), Redoc without
anything from another host. The pages rendering in Chromium: ``test_docs_browser.py``."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from django.test import Client
from drf_spectacular.generators import SchemaGenerator

from api import docs

JSON = "application/vnd.oai.openapi+json"

pytestmark = pytest.mark.django_db  # the docs pages pass the middleware that reads the session


def _operations(doc: dict[str, Any]) -> set[str]:
    return {
        op["operationId"] for item in doc["paths"].values() for op in item.values() if isinstance(op, dict)
    }


@pytest.fixture
def generated(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The OpenAPI versions of the documents generated during the test (none cached before it)."""
    versions: list[str] = []
    original = SchemaGenerator.get_schema

    def counted(self: SchemaGenerator, *args: Any, **kwargs: Any) -> Any:
        schema = original(self, *args, **kwargs)
        versions.append(schema["openapi"])
        return schema

    docs.schema_cache_clear()
    monkeypatch.setattr(SchemaGenerator, "get_schema", counted)
    yield versions
    docs.schema_cache_clear()


def test_the_document_is_generated_once_then_answered_with_its_etag(generated: list[str]) -> None:
    client = Client()
    first = client.get("/api/v1/schema")
    again = client.get("/api/v1/schema")
    assert first.status_code == again.status_code == 200
    assert first.content == again.content and first["ETag"] == again["ETag"]
    assert first["Content-Type"] == "application/vnd.oai.openapi; charset=utf-8"
    assert yaml.safe_load(first.content)["openapi"] == "3.1.0"
    assert generated == ["3.1.0"]  # the second request did not generate it again
    unchanged = client.get("/api/v1/schema", HTTP_IF_NONE_MATCH=first["ETag"])
    assert unchanged.status_code == 304 and unchanged.content == b""
    as_json = client.get("/api/v1/schema", HTTP_ACCEPT=JSON)
    assert as_json["Content-Type"].startswith(JSON) and as_json.json()["openapi"] == "3.1.0"
    assert generated == ["3.1.0", "3.1.0"]  # one per format
    packed = client.get("/api/v1/schema", HTTP_ACCEPT=JSON, HTTP_ACCEPT_ENCODING="gzip")
    assert packed["Content-Encoding"] == "gzip" and len(packed.content) < len(as_json.content) / 5


def test_swagger_ui_reads_the_3_0_rendition_of_the_same_operations(generated: list[str]) -> None:
    client = Client()
    page = client.get("/api/v1/docs").content.decode()
    assert 'url: "/api/v1/schema?oas\\u003D3.0"' in page  # escaped by the template's escapejs
    rendition = client.get("/api/v1/schema?oas=3.0", HTTP_ACCEPT="application/json").json()
    contract = client.get("/api/v1/schema", HTTP_ACCEPT=JSON).json()
    assert rendition["openapi"] == "3.0.3" and contract["openapi"] == "3.1.0"
    assert _operations(rendition) == _operations(contract) and len(_operations(contract)) > 40
    assert set(rendition["components"]["schemas"]) == set(contract["components"]["schemas"])
    # the 3.1 document generated after the rendition is still 3.1 (the settings were restored)
    assert generated == ["3.0.3", "3.1.0"]


def test_the_doc_pages_load_only_the_projects_files() -> None:
    client = Client()
    for url in ("/api/v1/docs", "/api/v1/redoc"):
        page = client.get(url).content.decode()
        assert "googleapis" not in page and "gstatic" not in page and "cdn" not in page.lower(), url
        assert "/static/drf_spectacular_sidecar/" in page, url
