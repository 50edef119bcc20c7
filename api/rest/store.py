"""``/api/v1/store/...``: LangGraph's ``BaseStore`` over Engram (the Python client's ``EngramStore``).

The store is tenant-wide: every agent of the tenant reads every item (``read`` scope) and puts or
deletes any (``write`` scope); another tenant sees nothing. A namespace is a list of labels in a
JSON body and its labels joined by "." in a query string (LangGraph forbids "." in a label).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_field, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.response import Response

from api.fields import (
    CleanCharField,
    CleanRegexField,
    JSONObjectField,
    JSONValueField,
    StrictBooleanField,
    StrictFloatField,
    StrictIntegerField,
    StrictQueryInteger,
    StrictSerializer,
    subject_field,
    subject_filter_field,
)
from api.idempotency import idempotent, idempotent_read
from api.views import AgentRequest, ApiView
from core.errors import NotFound
from memory.store import services
from memory.store.models import MAX_KEY_LENGTH, MAX_LABEL_LENGTH, MAX_NAMESPACE_DEPTH, StoreItem

MAX_SEARCH_LIMIT = 1000
MAX_OFFSET = 100_000
MAX_QUERY_LENGTH = 2000
# a dotted namespace in a query string: every label and its dots
MAX_DOTTED_LENGTH = MAX_NAMESPACE_DEPTH * (MAX_LABEL_LENGTH + 1)


# a namespace label: 1 to MAX_LABEL_LENGTH characters, no "." (``services.namespace_check``)
LABEL_PATTERN = rf"^[^.\u0000]{{1,{MAX_LABEL_LENGTH}}}$"
# labels joined by "." in a query string
DOTTED_PATTERN = rf"^[^.\u0000]{{1,{MAX_LABEL_LENGTH}}}(\.[^.\u0000]{{1,{MAX_LABEL_LENGTH}}}){{0,{MAX_NAMESPACE_DEPTH - 1}}}$"
LABEL_MESSAGE = f'A namespace label has 1 to {MAX_LABEL_LENGTH} characters, none of them ".".'


def _labels(**kwargs: Any) -> serializers.ListField:
    return serializers.ListField(
        child=CleanRegexField(
            LABEL_PATTERN, message=LABEL_MESSAGE, max_length=MAX_LABEL_LENGTH, trim_whitespace=False
        ),
        max_length=MAX_NAMESPACE_DEPTH,
        **kwargs,
    )


@extend_schema_field(
    {
        "anyOf": [
            {"const": False},
            {
                "type": "array",
                "maxItems": services.MAX_INDEX_PATHS,
                "items": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": services.MAX_PATH_LENGTH,
                    # services.index_paths_check: names joined by ".", [n], [-n] or [*] after a list
                    "pattern": r"^(?:[^\[\]{\u0000]|\[(?:\*|-?[0-9]+)\])+$",
                },
            },
        ],
        "description": "false: not indexed; a list: the JSON paths of the value whose text is indexed "
        '(`a.b`, `a[0]`, `a[*].b`); null or absent: the whole value (`"$"`)',
    }
)
class IndexField(serializers.Field):
    """LangGraph's ``index`` argument of a put: ``false``, a list of paths, or null."""

    def to_internal_value(self, data: Any) -> Any:
        if data is False:
            return False
        if isinstance(data, list) and all(isinstance(p, str) for p in data):
            return data
        raise serializers.ValidationError("Expected false, a list of JSON paths, or null.")

    def to_representation(self, value: Any) -> Any:
        return value


@extend_schema_field({"type": "number", "exclusiveMinimum": 0, "maximum": services.MAX_TTL_MINUTES})
class TtlField(StrictFloatField):
    """An item's TTL: minutes above 0 (``exclusiveMinimum``), or null."""

    def to_internal_value(self, data: Any) -> float:
        value = super().to_internal_value(data)
        if value <= 0:
            raise serializers.ValidationError(
                f"A TTL is a number of minutes above 0, at most {services.MAX_TTL_MINUTES}, or null."
            )
        return value


class StorePutInputSerializer(StrictSerializer):
    namespace = _labels(min_length=1, help_text='the item\'s namespace, e.g. ["memories", "user-42"]')
    key = CleanCharField(max_length=MAX_KEY_LENGTH, trim_whitespace=False, help_text="the item's key in it")
    value = JSONObjectField(help_text="the item: a JSON object (filterable by its fields)")
    index = IndexField(required=False, allow_null=True, default=None)
    ttl = TtlField(
        required=False,
        allow_null=True,
        default=None,
        max_value=services.MAX_TTL_MINUTES,
        help_text="minutes until the item expires, restarted by each put and refreshing read; null: never",
    )
    data_subject = subject_field()


@extend_schema_serializer(component_name="StoreItem")
class ItemOutputSerializer(serializers.Serializer):
    namespace = serializers.ListField(child=serializers.CharField())
    key = serializers.CharField()
    value = JSONValueField(kind="object")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True, help_text="null: no TTL")
    ttl = serializers.FloatField(allow_null=True, source="ttl_minutes", help_text="minutes; null: no TTL")
    indexed = serializers.ListField(
        child=serializers.CharField(), source="index_paths", help_text="the paths indexed (empty: none)"
    )
    data_subject = serializers.CharField(allow_null=True)
    created_by = serializers.CharField(source="created_by.name")
    updated_by = serializers.CharField(source="updated_by.name")


@extend_schema_serializer(component_name="StoreItemWritten")
class PutOutputSerializer(ItemOutputSerializer):
    created = serializers.BooleanField(help_text="true when no live item was there")
    event_id = serializers.IntegerField(help_text="the decision event recording the put")


@extend_schema_field({"type": "string", "maxLength": MAX_DOTTED_LENGTH, "pattern": DOTTED_PATTERN})
class DottedNamespaceField(CleanCharField):
    """A namespace in a query string: its labels joined by "." (``memories.user-42``); the
    document's pattern is what ``services.namespace_check`` accepts of the labels, whose errors
    name each label (``namespace[1]``)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", MAX_DOTTED_LENGTH)
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> list[str]:  # type: ignore[override]  # the labels
        return str(super().to_internal_value(data)).split(".")


class StoreItemParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    namespace = DottedNamespaceField(help_text='the namespace, its labels joined by "."')
    key = CleanCharField(max_length=MAX_KEY_LENGTH, trim_whitespace=False)


class StoreGetParams(StoreItemParams):
    refresh_ttl = serializers.ChoiceField(
        choices=["true", "false"], required=False, default="true", help_text="restart the item's TTL"
    )


@extend_schema_serializer(component_name="StoreItemDeleted")
class DeleteOutputSerializer(serializers.Serializer):
    deleted = serializers.BooleanField(help_text="false: there was no such item")
    event_id = serializers.IntegerField(allow_null=True, help_text="the decision event recording the delete")


def _item_body(item: StoreItem) -> dict[str, Any]:
    return dict(ItemOutputSerializer(item).data) | {"data_subject": item.data_subject or None}


class ItemsView(ApiView):
    """POST puts an item (creates or replaces it); GET reads one; DELETE deletes one."""

    get_query_params = frozenset(StoreGetParams().fields)
    delete_query_params = frozenset(StoreItemParams().fields)
    error_statuses = {"post": (409, 503), "get": (404,)}

    @extend_schema(
        operation_id="store_put",
        summary="Put a store item",
        description="Create or replace the item at (namespace, key); its indexed text is embedded for "
        "search. 201 when no live item was there, else 200. Recorded in the trail.",
        request=StorePutInputSerializer,
        responses={201: PutOutputSerializer, 200: PutOutputSerializer},
        examples=[
            OpenApiExample(
                "A preference",
                value={"namespace": ["memories", "user-42"], "key": "food", "value": {"text": "likes ramen"}},
                request_only=True,
            )
        ],
        tags=["store"],
    )
    @idempotent
    def post(self, request: AgentRequest) -> Response:
        serializer = StorePutInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        result = services.item_put(
            agent=request.user,
            namespace=data["namespace"],
            key=data["key"],
            value=data["value"],
            index=data["index"],
            ttl_minutes=data["ttl"],
            data_subject=data["data_subject"],
        )
        body = _item_body(result.item) | {"created": result.created, "event_id": result.event.pk}
        return Response(body, status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)

    @extend_schema(
        operation_id="store_get",
        summary="Get a store item",
        parameters=[StoreGetParams],
        responses={200: ItemOutputSerializer},
        tags=["store"],
    )
    def get(self, request: AgentRequest) -> Response:
        p = self.query(StoreGetParams)
        item = services.item_get(
            agent=request.user, namespace=p["namespace"], key=p["key"], refresh_ttl=p["refresh_ttl"] == "true"
        )
        if item is None:
            raise NotFound("No such item in that namespace.", field="key")
        return Response(_item_body(item))

    @extend_schema(
        operation_id="store_delete",
        summary="Delete a store item",
        parameters=[StoreItemParams],
        responses={200: DeleteOutputSerializer},
        tags=["store"],
    )
    def delete(self, request: AgentRequest) -> Response:
        p = self.query(StoreItemParams)
        event = services.item_delete(agent=request.user, namespace=p["namespace"], key=p["key"])
        return Response({"deleted": event is not None, "event_id": event.pk if event else None})


class StoreSearchInputSerializer(StrictSerializer):
    namespace_prefix = _labels(required=False, default=list, help_text="items under it (empty: all)")
    query = CleanCharField(
        required=False,
        allow_null=True,
        default=None,
        max_length=MAX_QUERY_LENGTH,
        help_text="rank by hybrid recall (vector + BM25) of the items' indexed text; null: newest first",
    )
    filter = JSONObjectField(
        required=False,
        default=dict,
        max_bytes=16 * 1024,
        help_text="LangGraph's filter: value fields equal to a value, or operators $eq $ne $gt $gte $lt $lte",
    )
    limit = StrictIntegerField(min_value=1, max_value=MAX_SEARCH_LIMIT, default=10)
    offset = StrictIntegerField(min_value=0, max_value=MAX_OFFSET, default=0)
    refresh_ttl = StrictBooleanField(default=True, help_text="restart the TTLs of the items returned")
    data_subject = subject_filter_field()


@extend_schema_serializer(component_name="StoreSearchItem")
class StoreSearchItemSerializer(ItemOutputSerializer):
    score = serializers.FloatField(allow_null=True, help_text="relevance in [0, 1]; null without a query")


@extend_schema_serializer(component_name="StoreSearchResult")
class StoreSearchOutputSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    results = StoreSearchItemSerializer(many=True)


class StoreSearchView(ApiView):
    """Search items under a namespace prefix; a read, so it needs only the ``read`` scope."""

    required_scope = "read"
    error_statuses = (409, 503)

    @extend_schema(
        operation_id="store_search",
        summary="Search store items",
        description="Items under `namespace_prefix` matching `filter`, `offset` then `limit` of them: ranked "
        "by semantic memory's hybrid recall with a `query`, else newest change first. With a `query` "
        "only the first 1000 ranked items are reachable: a page reaching past them is cut there, and one "
        "starting past them is empty.",
        request=StoreSearchInputSerializer,
        responses={200: StoreSearchOutputSerializer},
        examples=[
            OpenApiExample(
                "By meaning",
                value={"namespace_prefix": ["memories"], "query": "what food do they like?", "limit": 3},
                request_only=True,
            )
        ],
        tags=["store"],
    )
    @idempotent_read
    def post(self, request: AgentRequest) -> Response:
        serializer = StoreSearchInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        limit, offset = data["limit"], data["offset"]
        if data["query"] is not None:  # a ranked page ends at the window (docs/decisions/0051)
            limit = min(limit, services.MAX_RANKED - offset)
        found = (
            services.items_search(
                agent=request.user,
                data_subject=data.get("data_subject"),
                namespace_prefix=data["namespace_prefix"],
                query=data["query"],
                conditions=data["filter"],
                limit=limit,
                offset=offset,
                refresh_ttl=data["refresh_ttl"],
            )
            if limit > 0
            else []
        )
        results = [
            _item_body(f.item) | {"score": None if f.score is None else round(f.score, 6)} for f in found
        ]
        return Response({"count": len(results), "results": results})


class StoreNamespacesParams(StrictSerializer):
    unknown_key_message = "Unknown query parameter."
    prefix = DottedNamespaceField(required=False, help_text='namespaces starting so ("*": any label)')
    suffix = DottedNamespaceField(required=False, help_text='namespaces ending so ("*": any label)')
    max_depth = StrictQueryInteger(
        required=False, min_value=1, max_value=MAX_NAMESPACE_DEPTH, help_text="cut to this many labels"
    )
    limit = StrictQueryInteger(required=False, default=100, min_value=1, max_value=MAX_SEARCH_LIMIT)
    offset = StrictQueryInteger(required=False, default=0, min_value=0, max_value=MAX_OFFSET)
    data_subject = subject_filter_field()


@extend_schema_serializer(component_name="StoreNamespaces")
class StoreNamespacesOutputSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    results = serializers.ListField(child=serializers.ListField(child=serializers.CharField()))


class StoreNamespacesView(ApiView):
    """LangGraph's ``list_namespaces``."""

    get_query_params = frozenset(StoreNamespacesParams().fields)

    @extend_schema(
        operation_id="store_namespaces",
        summary="List store namespaces",
        parameters=[StoreNamespacesParams],
        responses={200: StoreNamespacesOutputSerializer},
        tags=["store"],
    )
    def get(self, request: AgentRequest) -> Response:
        p = self.query(StoreNamespacesParams)
        found = services.namespaces_list(
            agent=request.user,
            data_subject=p.get("data_subject"),
            prefix=p.get("prefix"),
            suffix=p.get("suffix"),
            max_depth=p.get("max_depth"),
            limit=p["limit"],
            offset=p["offset"],
        )
        return Response({"count": len(found), "results": found})
