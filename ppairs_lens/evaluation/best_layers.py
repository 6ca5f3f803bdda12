"""Reading a layer sweep's table: the chosen read-out per dataset and probe kind.

A sweep scores every probe kind at every read-out on the test set (``value``, ``lo``,
``hi``) and marks, per (dataset, kind), the row of the read-out that
:func:`ppairs_lens.evaluation.readout_choice.choose_readouts` chose (``chosen``, with
``selected_by``). :func:`best_layers` reads that mark: it does not choose again, so a table
and every other view show one read-out. Baseline rows (``layer < 0``) are left out.
"""

from __future__ import annotations

from ppairs_lens.errors import ProbeError

__all__ = ["best_layers"]


def _chosen(r: dict) -> bool:
    v = r.get("chosen")
    return v is True or str(v).lower() == "true"       # CSV round trips give "True"


def best_layers(rows: list[dict], metric: str = "accuracy") -> list[dict]:
    """One row per (dataset, kind): the ``metric`` row at the chosen read-out, with its
    ``selected_by``. A (dataset, kind) whose rows carry no choice is refused (a table from
    before the choice was recorded: re-run the sweep)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["metric"] != metric or int(r["layer"]) < 0:
            continue
        groups.setdefault((r["dataset"], r["kind"]), []).append(r)
    out = []
    for (ds, kind), rs in groups.items():
        pick = [r for r in rs if _chosen(r)]
        if len(pick) != 1:
            raise ProbeError(f"sweep rows of ({ds}, {kind}) mark {len(pick)} chosen read-outs, "
                             "not one: re-run the sweep (it records the read-out choice)")
        out.append({**pick[0], "selected_by": pick[0].get("selected_by") or "validation"})
    return out
