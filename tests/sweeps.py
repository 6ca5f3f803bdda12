"""A layer sweep's record from a test's partial data: every field a test does not name at a
neutral value, so that a claim test states only what it is about."""

from __future__ import annotations

from analyses.layer_sweep import SweepResult
from ppairs_lens.io.records import record_from_data

TEST = {"metric": "accuracy", "value": None, "lo": None, "hi": None, "ci_counts": True}
ENTRY = {"dataset": "d", "kind": "supervised", "layer": 0, "hook": "blocks.0.hook_resid_post",
         "val_value": None, "selected_by": "validation", "split_used": "context", "n_test": 0,
         "n_groups_test": 0, "ci_unit": "context", "length_balanced": None,
         "unavailable": {}}
DIFF = {"value": None, "lo": None, "hi": None, "n_boot_used": 0, "n_groups": 0,
        "ci_counts": True, "a": None, "b": None, "n": 0, "metric": "accuracy",
        "group_diffs": (), "about": ""}
ROW = {"hook": "blocks.0.hook_resid_post", "metric": "accuracy", "ci_counts": True,
       "n_train": 0, "n_test": 0, "split_used": "context"}


def sweep_of(data: dict | None = None) -> SweepResult:
    """``data``'s ``entries`` (each with its ``test`` and ``minus``) and ``rows``, completed."""
    data = data or {}
    entries = [{**ENTRY, **e, "test": {**TEST, **e.get("test", {})},
                "minus": {k: {**DIFF, **d} for k, d in e.get("minus", {}).items()}}
               for e in data.get("entries", [])]
    return record_from_data(SweepResult, {
        "selection": "", "metric": "accuracy", "ci": "", "entries": entries,
        "rows": [{**ROW, **r} for r in data.get("rows", [])]}, "test sweep")
