"""``manage.py recall_eval [--output PATH]``: recall quality on both development sets at once.

Ranking is judged on LoCoMo (short questions about what was said) and MADial-Bench (a whole dialogue
that must recall the right past memory) together (docs/explanation/retrieval.md): this command
ingests what is missing (``locomo_ingest``, idempotent; ``madial_eval``'s archive), runs
``locomo_eval`` (k = 1, 5, 10) and ``madial_eval`` in their own tenants, prints both reports and
writes their figures as one JSON document (``{"locomo": {group: {metric: mean, "n"}}, "madial":
{metric: mean, "n"}}``) to ``--output`` when given. Through ``python -m benchmarks recall_eval --json`` the run's
record (commit, machine, load) is written besides.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from benchmarks._common import record
from benchmarks.management.commands.locomo_eval import locomo_evaluate
from benchmarks.management.commands.locomo_eval import report as locomo_report
from benchmarks.management.commands.madial_eval import madial_evaluate
from benchmarks.management.commands.madial_eval import report as madial_report

SHARED = Path(__file__).resolve().parents[4] / "shared"  # the read-only folder beside the repository
LOCOMO_FILE = SHARED / "data" / "locomo" / "locomo-dev5.json"
MADIAL_DIR = SHARED / "data" / "madial"
LOCOMO_KS = [1, 5, 10]


def recall_figures(
    *, locomo_path: str, madial_dir: str, locomo_tenant: str, madial_tenant: str
) -> tuple[dict[str, Any], str]:
    """Ingest what is missing, evaluate both sets; ``({"locomo": ..., "madial": ...}, printed report)``.
    Raises ``CommandError`` as ``locomo_eval`` / ``madial_eval`` do."""
    call_command("locomo_ingest", locomo_path, tenant=locomo_tenant, stdout=io.StringIO())
    locomo = locomo_evaluate(path=locomo_path, tenant=locomo_tenant, agent="locomo", ks=LOCOMO_KS)
    madial = madial_evaluate(folder=madial_dir, tenant=madial_tenant, agent="madial")
    figures = {"locomo": locomo.figures(LOCOMO_KS), "madial": madial.figures()}
    text = f"LoCoMo dev\n{locomo_report(locomo, LOCOMO_KS)}\n\n{madial_report(madial)}"
    return figures, text


class Command(BaseCommand):
    help = "LoCoMo and MADial recall figures in one run, printed and written as one JSON document."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--locomo", default=str(LOCOMO_FILE), help="the LoCoMo dev file")
        parser.add_argument("--madial", default=str(MADIAL_DIR), help="the MADial dev folder")
        parser.add_argument(
            "--locomo-tenant", default="locomo_dev", help="tenant for LoCoMo (created if missing)"
        )
        parser.add_argument(
            "--madial-tenant", default="madial_dev", help="tenant for MADial (created if missing)"
        )
        parser.add_argument(
            "--output",
            default=None,
            help="where the figures go as JSON (benchmarks/results holds run records only)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        figures, text = recall_figures(
            locomo_path=options["locomo"],
            madial_dir=options["madial"],
            locomo_tenant=options["locomo_tenant"],
            madial_tenant=options["madial_tenant"],
        )
        record(**figures)
        self.stdout.write(text)
        if options["output"]:
            output = Path(options["output"])
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            self.stdout.write(f"\nfigures written to {output}")
