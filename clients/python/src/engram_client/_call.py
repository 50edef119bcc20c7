"""The call layer both clients share.

An operation of the API is declared once, as a typed signature (``operations.py``) under one of
three decorators that name its route: ``operation`` (one request, one answer), ``listing`` (a
cursor-paged list, iterated item by item) and ``stream`` (Server-Sent Events). Each decorator makes
a descriptor that, read from an ``EngramClient``, is a method with that signature returning the
answer and, read from an ``AsyncEngramClient``, the same method returning an awaitable (or an async
iterator). How arguments become a request is one rule (``Route.call``): an argument named in the
path template fills it (URL-quoted); ``idempotency_key`` is the header; the argument named by
``body=`` is sent whole as the JSON body; the other arguments (those left at a default of None
left out, ``**options`` spelled out) are the query (GET, DELETE) or the members of the JSON body
(POST, PUT).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import string
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, Self, TypeVar, cast, overload
from urllib.parse import quote

import httpx
from httpx_sse import aconnect_sse, connect_sse

from .errors import TransportError, error_for
from .models import Page

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R")
Transport = TypeVar("Transport", httpx.BaseTransport, httpx.AsyncBaseTransport)

RETRY_STATUSES = frozenset({502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` tries in all; the n-th retry waits ``backoff * 2**(n-1)`` seconds. A connection
    error or a 502/503/504 is retried; any other answer is final."""

    attempts: int = 3
    backoff: float = 0.2

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed try number ``attempt`` (1-based)."""
        return self.backoff * 2 ** (attempt - 1)

    def settle(self, attempt: int, outcome: httpx.Response | httpx.TransportError) -> tuple[bool, Any]:
        """``(True, body)`` when try ``attempt`` is final (its JSON body, or the error raised:
        ``EngramError`` for an error answer, ``TransportError`` when the server cannot be reached);
        ``(False, None)`` when it is to be retried."""
        last = attempt == self.attempts
        if isinstance(outcome, httpx.TransportError):
            if last:
                raise TransportError(str(outcome)) from outcome
            return False, None
        if outcome.status_code in RETRY_STATUSES and not last:
            return False, None
        return True, result(outcome)


@dataclass(frozen=True)
class Call:
    """One API call: ``path`` under ``/api/v1/`` (or a full URL from a page's ``next``)."""

    method: str
    path: str
    json: Any = None
    params: Mapping[str, Any] | None = None

    def headers(self, idempotency_key: str | None) -> dict[str, str]:
        return {"Idempotency-Key": idempotency_key} if idempotency_key else {}

    def request(self, idempotency_key: str | None) -> dict[str, Any]:
        """The keyword arguments of ``httpx.Client.request`` for this call."""
        return {
            "method": self.method,
            "url": self.path,
            "json": self.json,
            "params": self.params,
            "headers": self.headers(idempotency_key),
        }


def segment(value: object) -> str:
    """``value`` as one URL path segment (every reserved character quoted, ``/`` included)."""
    return quote(str(value), safe="")


def result(response: httpx.Response) -> Any:
    """The JSON body of an answer (None when empty); raises ``EngramError`` for a 4xx/5xx."""
    body: Any = None
    if response.content:
        try:
            body = response.json()
        except ValueError:
            body = response.text
    if response.status_code >= 400:
        raise error_for(response.status_code, body)
    return body


@dataclass(frozen=True)
class Route:
    """Where an operation goes: HTTP ``method``, ``path`` template under ``/api/v1/``
    (``memories/{memory_id}``, as the OpenAPI document's path without its prefix), and ``body``, the
    argument sent whole as the JSON body (None: the arguments are the body's members)."""

    method: str
    path: str
    body: str | None = None

    @property
    def placeholders(self) -> list[str]:
        return [name for _, name, _, _ in string.Formatter().parse(self.path) if name]

    def call(self, arguments: dict[str, Any]) -> tuple[Call, str | None]:
        """The call for an operation's ``arguments`` (name: value, each to be sent), and its
        idempotency key (or None)."""
        values = dict(arguments)
        idempotency_key = values.pop("idempotency_key", None)
        path = self.path.format(**{name: segment(values.pop(name)) for name in self.placeholders})
        if self.body is not None:
            return Call(self.method, path, json=values.pop(self.body)), idempotency_key
        if self.method in ("GET", "DELETE"):
            return Call(self.method, path, params=values), idempotency_key
        return Call(self.method, path, json=values), idempotency_key


class Declared(Generic[P, T]):
    """An operation declared by a signature: its ``route`` and how a call's arguments bind."""

    def __init__(self, route: Route, signature: Callable[P, T]) -> None:
        self.route = route
        self.function = signature
        self.signature = inspect.signature(signature)
        functools.update_wrapper(cast(Any, self), signature)

    def call(self, *args: Any, **kwargs: Any) -> tuple[Call, str | None]:
        """The call (and idempotency key) for these arguments, without those left at a default
        of None; ``TypeError`` as Python's for arguments the signature does not take."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        parameters = self.signature.parameters
        sent: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            if parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
                sent.update(value)  # **options: each one as given
            elif not (value is None and parameters[name].default is None):
                sent[name] = value
        return self.route.call(sent)

    def method(self, run: Callable[[Call, str | None], Any]) -> Callable[..., Any]:
        """The method: its arguments made a call, which ``run`` sends (with its idempotency key)."""

        def method(*args: Any, **kwargs: Any) -> Any:
            return run(*self.call(*args, **kwargs))

        return functools.wraps(self.function)(method)


class Operation(Declared[P, T]):
    """One request, one answer (``T``, the JSON body as the declared type)."""

    @overload
    def __get__(self, client: None, owner: type) -> Self: ...
    @overload
    def __get__(self, client: SyncCaller, owner: type) -> Callable[P, T]: ...
    @overload
    def __get__(self, client: AsyncCaller, owner: type) -> Callable[P, Awaitable[T]]: ...
    def __get__(self, client: SyncCaller | AsyncCaller | None, owner: type) -> Any:
        if client is None:
            return self
        return self.method(lambda call, key: client.send(call, idempotency_key=key))


class Iterated(Declared[P, R], Generic[P, R, T]):
    """An operation whose method iterates items (``T``): ``iterate`` says how a client gets them."""

    @overload
    def __get__(self, client: None, owner: type) -> Self: ...
    @overload
    def __get__(self, client: SyncCaller, owner: type) -> Callable[P, Iterator[T]]: ...
    @overload
    def __get__(self, client: AsyncCaller, owner: type) -> Callable[P, AsyncIterator[T]]: ...
    def __get__(self, client: SyncCaller | AsyncCaller | None, owner: type) -> Any:
        return self if client is None else self.method(lambda call, _key: self.iterate(client, call))

    def iterate(self, client: SyncCaller | AsyncCaller, call: Call) -> Any:
        raise NotImplementedError


class Listing(Iterated[P, Page[T], T]):
    """A cursor-paged list: the method iterates the items of every page, following ``next``."""

    def iterate(self, client: SyncCaller | AsyncCaller, call: Call) -> Any:
        return client.items(call)


class Stream(Iterated[P, T, T]):
    """Server-Sent Events: the method iterates the ``data`` of each event (JSON decoded) until the
    caller stops."""

    def iterate(self, client: SyncCaller | AsyncCaller, call: Call) -> Any:
        return client.sse(call)


def operation(
    method: str, path: str, *, body: str | None = None
) -> Callable[[Callable[P, T]], Operation[P, T]]:
    """Declare an operation at ``method path`` (see the module docstring for how arguments map)."""
    return lambda signature: Operation(Route(method, path, body), signature)


def listing(method: str, path: str) -> Callable[[Callable[P, Page[T]]], Listing[P, T]]:
    """Declare a cursor-paged list operation; the signature returns one page."""
    return lambda signature: Listing(Route(method, path), signature)


def stream(path: str) -> Callable[[Callable[P, T]], Stream[P, T]]:
    """Declare a Server-Sent Events operation (GET); the signature returns one event's data."""
    return lambda signature: Stream(Route("GET", path), signature)


class Caller(Generic[Transport]):
    """What both clients hold: the retry policy and an httpx client (``http_class``) with the API's
    base URL and the key. ``base_url`` is the server (``http://127.0.0.1:8000``); ``timeout`` in
    seconds; ``transport`` is httpx's (tests, proxies)."""

    http_class: type[httpx.Client] | type[httpx.AsyncClient]

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: Transport | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        self._http: Any = self.http_class(
            base_url=base_url.rstrip("/") + "/api/v1/",
            headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"},
            timeout=timeout,
            transport=cast(Any, transport),  # the subclass's class takes its kind of transport
        )


class SyncCaller(Caller[httpx.BaseTransport]):
    """The synchronous machinery: ``send`` with retries, pages, Server-Sent Events."""

    http_class = httpx.Client

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def send(self, call: Call, *, idempotency_key: str | None = None) -> Any:
        """Send ``call`` with retries and return its JSON body. A POST without an
        ``idempotency_key`` gets a fresh one, the same on each retry ("" sends none). Raises
        ``EngramError`` subclasses for error answers and ``TransportError`` when the server cannot
        be reached."""
        if call.method == "POST" and idempotency_key is None:
            idempotency_key = str(uuid.uuid4())
        request = call.request(idempotency_key)
        for attempt in range(1, self.retry.attempts + 1):
            try:
                outcome: httpx.Response | httpx.TransportError = self._http.request(**request)
            except httpx.TransportError as exc:
                outcome = exc
            final, body = self.retry.settle(attempt, outcome)
            if final:
                return body
            time.sleep(self.retry.delay(attempt))
        raise AssertionError("unreachable: the last attempt is final")

    def pages(self, call: Call) -> Iterator[Page[Any]]:
        """Every page of a list operation, following ``next``."""
        page: Page[Any] = self.send(call)
        yield page
        while page["next"]:
            page = self.send(Call("GET", page["next"]))
            yield page

    def items(self, call: Call) -> Iterator[Any]:
        """Every item of a list operation, page after page."""
        for page in self.pages(call):
            yield from page["results"]

    def sse(self, call: Call) -> Iterator[Any]:
        """The JSON ``data`` of each Server-Sent Event of ``call`` (comments and events without
        data skipped); an error answer raises as ``send`` does."""
        with connect_sse(self._http, call.method, call.path, params=call.params) as source:
            if source.response.status_code >= 400:
                source.response.read()
                result(source.response)
            for event in source.iter_sse():
                if event.data:  # the SSE rule: an event without data is not dispatched
                    yield json.loads(event.data)


class AsyncCaller(Caller[httpx.AsyncBaseTransport]):
    """The asyncio machinery: ``send`` with retries, pages, Server-Sent Events."""

    http_class = httpx.AsyncClient

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def send(self, call: Call, *, idempotency_key: str | None = None) -> Any:
        """See ``SyncCaller.send``."""
        if call.method == "POST" and idempotency_key is None:
            idempotency_key = str(uuid.uuid4())
        request = call.request(idempotency_key)
        for attempt in range(1, self.retry.attempts + 1):
            try:
                outcome: httpx.Response | httpx.TransportError = await self._http.request(**request)
            except httpx.TransportError as exc:
                outcome = exc
            final, body = self.retry.settle(attempt, outcome)
            if final:
                return body
            await asyncio.sleep(self.retry.delay(attempt))
        raise AssertionError("unreachable: the last attempt is final")

    async def items(self, call: Call) -> AsyncIterator[Any]:
        """Every item of a list operation, page after page."""
        page: Page[Any] = await self.send(call)
        while True:
            for item in page["results"]:
                yield item
            if not page["next"]:
                return
            page = await self.send(Call("GET", page["next"]))

    async def sse(self, call: Call) -> AsyncIterator[Any]:
        """See ``SyncCaller.sse``."""
        async with aconnect_sse(self._http, call.method, call.path, params=call.params) as source:
            if source.response.status_code >= 400:
                await source.response.aread()
                result(source.response)
            async for event in source.aiter_sse():
                if event.data:
                    yield json.loads(event.data)
