"""``manage.py mcp --key <api key>``: the MCP server over stdio (what ``./engram mcp`` runs)."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from rest_framework.exceptions import AuthenticationFailed

from api.mcp.stdio import run_stdio


class Command(BaseCommand):
    help = "Serve Engram's MCP tools over stdio as the agent of an API key (or ENGRAM_API_KEY)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--key", default=os.environ.get("ENGRAM_API_KEY", ""), help="the agent's API key")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["key"]:
            raise CommandError(
                "Give the agent's API key: --key egm.<tenant>.<id>.<secret> (or ENGRAM_API_KEY)."
            )
        try:
            run_stdio(options["key"])
        except AuthenticationFailed as exc:
            raise CommandError(str(exc.detail)) from exc
