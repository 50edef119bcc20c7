"""The forgetting curve of semantic memory: recall probability and stability (pure functions).

Recall probability after ``t`` hours without access, for a memory of stability ``S`` hours:

    p = exp(-t / S)

the exponential forgetting curve (Ebbinghaus 1885, *Über das Gedächtnis*, in the exponential form
of the modern fits: Murre & Dros 2015, "Replication and Analysis of Ebbinghaus' Forgetting Curve",
PLoS ONE 10(7): e0120644; the same ``R = exp(-t/S)`` of Wozniak's two-component model of memory,
SuperMemo). Every recall or reinforcement raises the stability with the spacing effect: a recall
when the memory was nearly forgotten strengthens it more than one right after the last (Cepeda et
al. 2006, "Distributed practice in verbal recall tasks", Psychological Bulletin 132(3); the
"stabilization decreases with retrievability" rule of SuperMemo's SM-17):

    S' = min(S_MAX, S * (1 + g * max(1 - p, 0.1)))

with ``g`` the tenant's ``stability_growth`` and ``p`` the recall probability at the moment of the
recall; the floor of 0.1 makes every recall raise S (by at least ``0.1 * g``). ``S_MAX`` (ten
years) keeps the value finite. The same rule runs in SQL (``touch_sql``) where accesses are counted.
"""

from __future__ import annotations

import math

S_MAX_HOURS = 10 * 365 * 24.0
MIN_GAIN = 0.1


def recall_probability(hours: float, stability_hours: float) -> float:
    """``exp(-t/S)`` in [0, 1] for ``t = hours`` (negative counts as 0) and ``S = stability_hours`` (> 0)."""
    return math.exp(-max(0.0, hours) / stability_hours)


def stability_after_recall(stability_hours: float, hours_since_access: float, growth: float) -> float:
    """The stability after a recall ``hours_since_access`` after the previous access (see module)."""
    p = recall_probability(hours_since_access, stability_hours)
    return min(S_MAX_HOURS, stability_hours * (1.0 + growth * max(1.0 - p, MIN_GAIN)))


def hours_until(threshold: float, stability_hours: float) -> float:
    """The hours without access after which ``p`` falls below ``threshold`` (in (0, 1)): ``-S ln θ``."""
    return -stability_hours * math.log(threshold)


# The same update in SQL, for ``UPDATE memory_memoryaccess SET stability_hours = <this>`` (parameters,
# in order: growth, now); it reads the old last_accessed_at, so it is set in the same UPDATE.
STABILITY_SQL = (
    f"LEAST({S_MAX_HOURS}, stability_hours * (1 + %s * GREATEST({MIN_GAIN}, 1 - exp("
    "-GREATEST(0, extract(epoch FROM (%s - last_accessed_at))) / 3600.0 / stability_hours))))"
)


# The same rule for ``n`` accesses of one memory applied together (the recall-touch buffer's flush,
# ``services.clocks.accesses_flush``), the first at ``first_at``: the first raises S as above, and each later
# one follows it within the flush delay (seconds), when ``1 - p`` is far below ``MIN_GAIN`` for any
# stability above a few minutes, so each multiplies S by ``1 + g * MIN_GAIN``:
#     S' = min(S_MAX, S * (1 + g * max(1 - p(first_at), MIN_GAIN)) * (1 + g * MIN_GAIN) ** (n - 1))
# ``first_at`` and ``n`` are SQL expressions (columns of the batch); the two parameters are the growth.
def batch_stability_sql(first_at: str, n: str) -> str:
    """The batched rule above as SQL for ``UPDATE memory_memoryaccess SET stability_hours = <this>``,
    ``first_at`` / ``n`` naming the batch's columns; parameters, in order: growth, growth."""
    return (
        f"LEAST({S_MAX_HOURS}, stability_hours * (1 + %s * GREATEST({MIN_GAIN}, 1 - exp("
        f"-GREATEST(0, extract(epoch FROM ({first_at} - last_accessed_at))) / 3600.0 / stability_hours)))"
        f" * power(1 + %s * {MIN_GAIN}, {n} - 1))"
    )


def stability_after_recalls(
    stability_hours: float, hours_since_access: float, growth: float, n: int
) -> float:
    """``stability_after_recall`` for ``n`` recalls in quick succession (``batch_stability_sql``)."""
    p = recall_probability(hours_since_access, stability_hours)
    first = stability_hours * (1.0 + growth * max(1.0 - p, MIN_GAIN))
    return min(S_MAX_HOURS, first * (1.0 + growth * MIN_GAIN) ** (n - 1))
