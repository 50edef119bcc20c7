"""Every model change has its migration: ``makemigrations --check`` finds nothing to write. Parallel
branches each add migrations and a merge can leave a model ahead of them (a help text changed in
tenants went unnoticed for a session); this fails where the drift appears, not on the next
contributor's machine."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_no_model_change_lacks_a_migration() -> None:
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exit_:  # --check exits 1 when a migration would be written
        pytest.fail(f"makemigrations --check would write migrations (exit {exit_.code}):\n{out.getvalue()}")
