"""Logins and failed logins to the tenant admin, recorded in the trail. Django's ``user_logged_in``
and ``user_login_failed`` signals are the only hook into ``django.contrib.auth``'s login view, so
these receivers do nothing but call ``services.login_record``."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.http import HttpRequest

from . import services


def _address(request: HttpRequest | None) -> str:
    return "" if request is None else str(request.META.get("REMOTE_ADDR", ""))


def on_login(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    services.login_record(username=user.get_username(), succeeded=True, address=_address(request))


def on_login_failed(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    services.login_record(
        username=str(credentials.get("username", "")), succeeded=False, address=_address(request)
    )


def connect() -> None:
    """Connect the receivers (``ComplianceConfig.ready``); idempotent (``dispatch_uid``)."""
    user_logged_in.connect(on_login, dispatch_uid="compliance.login")
    user_login_failed.connect(on_login_failed, dispatch_uid="compliance.login_failed")
