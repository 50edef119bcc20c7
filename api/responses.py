"""Responses with work that runs once they are sent."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.http import HttpResponse

logger = logging.getLogger(__name__)


class ThenResponse(HttpResponse):
    """An ``HttpResponse`` that runs ``then`` (if given) when it is closed: the WSGI and ASGI
    handlers close a response after its body was sent (Django's test client and the MCP dispatch
    before they return it), so the client's answer does not wait for ``then``. What ``then`` raises
    is logged, never sent: the answer is already out."""

    def __init__(self, *args: Any, then: Callable[[], object] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._then = then

    def close(self) -> None:
        then, self._then = self._then, None  # once, however often the server closes it
        try:
            if then is not None:
                then()
        except Exception:
            logger.exception("work after the response failed")
        finally:
            super().close()
