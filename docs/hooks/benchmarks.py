"""The benchmarks page, drawn from ``benchmarks/results/*.json`` at build time (an MkDocs hook).

Each record (``python -m benchmarks NAME --json``: command, commit, machine, load before and after,
figures) becomes a section of ``docs/benchmarks.md`` where its marker ``<!-- generated: benchmarks
-->`` stands: what was run where, a table of the figures, and a plot (PNG, matplotlib's Agg backend,
no JavaScript) for the benchmarks whose figures have a shape drawn here (search latency against
corpus size, checkpoint restore percentiles, CEL check costs). ``mkdocs build`` redraws them all.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent.parent
RESULTS = BASE_DIR / "benchmarks" / "results"
MARKER = "<!-- generated: benchmarks -->"
IMAGE_DIR = "benchmarks-img"


def records() -> list[dict[str, Any]]:
    """Every stored record, by benchmark name."""
    return [json.loads(path.read_text()) for path in sorted(RESULTS.glob("*.json"))]


def _figure() -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 3.6), dpi=110)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _png(fig: Any) -> bytes:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def _search_latency(figures: dict[str, Any]) -> tuple[str, bytes | None]:
    rows = figures.get("latency_ms") or []
    table = ["| memories | path | p50 ms | p95 ms | p99 ms | max ms |", "|---:|---|---:|---:|---:|---:|"]
    paths: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        table.append(
            f"| {row['memories']:,} | {row['path']} | {row['p50']:.1f} | {row['p95']:.1f} | "
            f"{row['p99']:.1f} | {row['max']:.1f} |"
        )
        paths.setdefault(row["path"], []).append(row)
    if not rows:
        return "", None
    fig, ax = _figure()
    for path, points in paths.items():
        points.sort(key=lambda p: p["memories"])
        line = ax.plot(
            [p["memories"] for p in points], [p["p50"] for p in points], marker="o", label=f"{path} p50"
        )
        ax.plot(
            [p["memories"] for p in points],
            [p["p95"] for p in points],
            marker="x",
            linestyle="--",
            color=line[0].get_color(),
            label=f"{path} p95",
        )
    ax.set_xscale("log")
    ax.set_xlabel("memories in the tenant (log scale)")
    ax.set_ylabel("ms per search (k=10)")
    ax.set_title("Hybrid search latency against corpus size")
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.set_size_inches(10, 3.8)
    return "\n".join(table) + "\n", _png(fig)


def _checkpoint_restore(figures: dict[str, Any]) -> tuple[str, bytes | None]:
    results: dict[str, dict[str, float]] = figures.get("latency_ms") or {}
    if not results:
        return "", None
    marks = ["p50", "p95", "p99", "max"]
    table = [
        "| path | n | " + " | ".join(f"{m} ms" for m in marks) + " |",
        "|---|---:|" + "---:|" * len(marks),
    ]
    fig, ax = _figure()
    for label, stats in results.items():
        table.append(
            f"| {label} | {int(stats.get('n', 0)):,} | " + " | ".join(f"{stats[m]:.2f}" for m in marks) + " |"
        )
        ax.plot(marks, [stats[m] for m in marks], marker="o", label=label)
    ax.set_yscale("log")
    ax.set_xlabel("percentile of the restores")
    ax.set_ylabel("ms (log scale)")
    ax.set_title("Latest-checkpoint restore: the latency distribution")
    ax.legend(fontsize=7)
    return "\n".join(table) + "\n", _png(fig)


def _cel_cost(figures: dict[str, Any]) -> tuple[str, bytes | None]:
    expressions: dict[str, dict[str, Any]] = figures.get("expressions") or {}
    if not expressions:
        return "", None
    table = [
        "| expression | chars | outcome | check p50 ms | check max ms | evaluate max ms |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for name, e in expressions.items():
        table.append(
            f"| {name} | {e['chars']:,} | {e['outcome']} | {e['check_median_ms']} | {e['check_max_ms']} | "
            f"{e['evaluate_max_ms']} |"
        )
    fig, ax = _figure()
    names = list(expressions)
    ax.barh(names, [expressions[n]["check_max_ms"] for n in names], color="#c5cae9", label="check, max")
    ax.barh(names, [expressions[n]["check_median_ms"] for n in names], color="#3f51b5", label="check, median")
    ax.set_xlabel("ms to check a skill condition (compile time)")
    ax.set_title("CEL conditions: the cost of the step budget's checks")
    ax.tick_params(axis="y", labelsize=6)
    ax.legend(fontsize=7)
    return "\n".join(table) + "\n", _png(fig)


def _generic(figures: dict[str, Any]) -> tuple[str, bytes | None]:
    table = ["| figure | value |", "|---|---|"]
    for name, value in figures.items():
        table.append(f"| {name} | `{json.dumps(value)[:200]}` |")
    return "\n".join(table) + "\n", None


def _recall_eval(figures: dict[str, Any]) -> tuple[str, bytes | None]:
    """``recall_eval``'s figures: one row per LoCoMo category (and all of 1-4), one for MADial (its mrr is MRR@20)."""
    metrics = ["hit@1", "hit@5", "hit@10", "mrr", "recall@5", "recall@10"]
    table = ["| set | questions | " + " | ".join(metrics) + " |", "|---|---" + "|---" * len(metrics) + "|"]
    rows = [(f"LoCoMo {group}", values) for group, values in (figures.get("locomo") or {}).items()]
    rows.append(("MADial", figures.get("madial") or {}))
    for label, values in rows:
        cells = [f"{values[m]:.3f}" if isinstance(values.get(m), int | float) else "" for m in metrics]
        table.append(f"| {label} | {values.get('n', '')} | " + " | ".join(cells) + " |")
    return "\n".join(table) + "\n", None


def _load_test(figures: dict[str, Any]) -> tuple[str, bytes | None]:
    """``load``'s figures: one row per step (agents, the rate, percentiles over every request,
    errors, the machine's load, the cores of the web processes, PostgreSQL and the rest)."""
    setup = figures.get("setup") or {}
    head = (
        f"{setup.get('tenants', '?')} tenants, {setup.get('web', '?')} web processes, think "
        f"{setup.get('think_s', '?')} s, embedder {setup.get('embedder', '?')}\n\n"
    )
    table = [
        "| agents | req/s | p50 ms | p95 ms | p99 ms | errors | load | web cores | PostgreSQL cores | other cores |",
        "|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for step in figures.get("steps") or []:
        cores = step.get("cores") or {}
        table.append(
            f"| {step['users']} | {step['rps']:.1f} | {step['p50_ms']:.0f} | {step['p95_ms']:.0f} | "
            f"{step['p99_ms']:.0f} | {step['failures']:.0f} / {step['requests']:.0f} | "
            f"{step['load_before'][0]:.1f} -> {step['load_after'][0]:.1f} | {cores.get('web', '')} | "
            f"{cores.get('postgres', '')} | {cores.get('other', '')} |"
        )
    return head + "\n".join(table) + "\n", None


RENDERERS: dict[str, Callable[[dict[str, Any]], tuple[str, bytes | None]]] = {
    "load": _load_test,
    "recall_eval": _recall_eval,
    "search_latency": _search_latency,
    "checkpoint_restore": _checkpoint_restore,
    "cel_cost": _cel_cost,
}


def _load(record: dict[str, Any]) -> str:
    def fmt(load: list[float | None] | None) -> str:
        return " / ".join(f"{x:.1f}" for x in (load or []) if x is not None) or "not recorded"

    return f"{fmt(record.get('load_before'))} before, {fmt(record.get('load_after'))} after"


def sections() -> tuple[str, dict[str, bytes]]:
    """The page's generated Markdown and its images (file name -> PNG)."""
    parts: list[str] = []
    images: dict[str, bytes] = {}
    for record in records():
        name = record["benchmark"]
        commit = record.get("commit") or {}
        machine = record.get("machine") or {}
        table, png = RENDERERS.get(name, _generic)(record.get("figures") or {})
        parts.append(f"### {name}\n")
        parts.append(
            f"`{' '.join(record.get('command') or [])}` at commit `{(commit.get('sha') or '?')[:10]}`"
            f"{' (uncommitted changes)' if commit.get('dirty') else ''}, finished "
            f"{record.get('finished_at') or '?'}; {machine.get('cpus', '?')} CPUs, Python "
            f"{machine.get('python', '?')}; load average (1 / 5 / 15 min) {_load(record)}.\n"
        )
        if png is not None:
            images[f"{name}.png"] = png
            parts.append(f"![{name}]({IMAGE_DIR}/{name}.png)\n")
        parts.append(table)
    return "\n".join(parts), images


_CACHE: dict[str, Any] = {}


def on_files(files: Any, config: Any) -> Any:
    """MkDocs hook: draw the plots and add them to the site's files."""
    from mkdocs.structure.files import File

    markdown, images = sections()
    _CACHE["markdown"] = markdown
    for name, png in images.items():
        files.append(File.generated(config, f"{IMAGE_DIR}/{name}", content=png))
    return files


def on_page_markdown(markdown: str, **kwargs: object) -> str:
    """MkDocs hook: put the generated sections where the page's marker stands."""
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, _CACHE.get("markdown") or sections()[0])
    return markdown
