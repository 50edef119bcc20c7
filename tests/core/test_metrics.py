"""``/metrics`` needs its token; production never serves loopback without one."""

from __future__ import annotations

from django.test import Client


def test_without_a_token_production_refuses_loopback_scrapers(db, settings, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import importlib

    monkeypatch.setenv("DJANGO_SECRET_KEY", "production-test-key-" + "x" * 40)
    production = importlib.import_module("config.settings.production")
    assert production.ENGRAM["METRICS_LOOPBACK"] is False
    settings.ENGRAM = {**settings.ENGRAM, "METRICS_TOKEN": "", "METRICS_LOOPBACK": False}
    assert Client().get("/metrics").status_code == 403  # a loopback client, as behind a local proxy
