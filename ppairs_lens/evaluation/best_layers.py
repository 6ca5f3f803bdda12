"""Reading a layer sweep's table: the best read-out per dataset and probe kind.

A sweep scores every probe kind at every read-out; :func:`best_layers` picks, per
(dataset, kind), the read-out with the highest point estimate of one metric, as the study's
summary and the notebooks report it.
"""

from __future__ import annotations

__all__ = ["best_layers"]


def best_layers(rows: list[dict], metric: str = "accuracy") -> list[dict]:
    """The best layer per (dataset, kind) by the point estimate (the first on a tie)."""
    best: dict[tuple, dict] = {}
    for r in rows:
        if r["metric"] != metric:
            continue
        key = (r["dataset"], r["kind"])
        if key not in best or r["value"] > best[key]["value"]:
            best[key] = r
    return list(best.values())
