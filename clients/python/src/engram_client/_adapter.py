"""What the LangGraph adapters share: the sync and async Engram clients they talk through, made on
first use from ``base_url`` and ``api_key`` unless given, closed with the adapter."""

from __future__ import annotations

from typing import Self

from .client import AsyncEngramClient, EngramClient


class ClientsHolder:
    """An adapter's two clients. ``client`` (an ``EngramClient``) serves the sync methods and
    ``async_client`` (an ``AsyncEngramClient``) the async ones; each is made on first use unless
    passed in. Usable as a context manager, sync or async, which closes them. Raises ``ValueError``
    (naming ``name``) without ``base_url`` and ``api_key`` or a client."""

    def _clients_init(
        self,
        name: str,
        base_url: str,
        api_key: str,
        client: EngramClient | None,
        async_client: AsyncEngramClient | None,
        timeout: float,
    ) -> None:
        if client is None and async_client is None and not (base_url and api_key):
            raise ValueError(f"{name} needs base_url and api_key, or a client.")
        self._base_url, self._api_key, self._timeout = base_url, api_key, timeout
        self._client, self._async_client = client, async_client

    @property
    def client(self) -> EngramClient:
        if self._client is None:
            self._client = EngramClient(self._base_url, self._api_key, timeout=self._timeout)
        return self._client

    @property
    def async_client(self) -> AsyncEngramClient:
        if self._async_client is None:
            self._async_client = AsyncEngramClient(self._base_url, self._api_key, timeout=self._timeout)
        return self._async_client

    def close(self) -> None:
        """Close the sync client (if one was made or given)."""
        if self._client is not None:
            self._client.close()

    async def aclose(self) -> None:
        """Close both clients."""
        self.close()
        if self._async_client is not None:
            await self._async_client.aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
