"""Reading a layer sweep's table: the chosen read-out per dataset and probe kind.

A sweep scores every probe kind at every read-out, on the test set (``value``, ``lo``,
``hi``) and on a validation split of the training data (``val_value``). :func:`best_layers`
chooses, per (dataset, kind), the read-out with the best *validation* score
(:func:`ppairs_lens.evaluation.layer_selection.select_layer`) and reports the test score at
that read-out: the test set is never read to choose. Baseline rows (``layer < 0``: the
memorisation, surface and prompted judges) are not layers and are left out.
"""

from __future__ import annotations

import math

import numpy as np

from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.layer_selection import select_layer

__all__ = ["best_layers"]


def _val(r: dict) -> float:
    v = r.get("val_value")
    if v is None or v == "":
        raise ProbeError(f"sweep row ({r.get('dataset')}, {r.get('kind')}, layer "
                         f"{r.get('layer')}) has no val_value: the layer cannot be chosen "
                         f"without reading the test set; re-run the sweep (it now scores a "
                         f"validation split)")
    return float(v) if not (isinstance(v, float) and math.isnan(v)) else float("nan")


def best_layers(rows: list[dict], metric: str = "accuracy") -> list[dict]:
    """One row per (dataset, kind): the ``metric`` row at the validation-chosen layer, with
    ``selected_by`` (``"validation"``, or the sweep's fallback when no validation split was
    possible: training accuracy). Rows without ``val_value`` are refused."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["metric"] != metric or int(r["layer"]) < 0:
            continue
        groups.setdefault((r["dataset"], r["kind"]), []).append(r)
    out = []
    for rs in groups.values():
        rs = sorted(rs, key=lambda r: int(r["layer"]))
        pick = rs[select_layer(np.array([_val(r) for r in rs]))]
        out.append({**pick, "selected_by": pick.get("val_source") or "validation"})
    return out
