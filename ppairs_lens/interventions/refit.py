"""Probes on activations harvested under an ablation: is the information gone, or moved?

Probes are scored on pairs re-harvested under an ablation, as fitted on clean activations
(``mode="original"``) and refitted on the ablated ones (``mode="refit"``): a refit that
recovers means the judgement is still linearly readable in other directions; one that falls to
chance means the information is gone. A clean probe's *accuracy* also drops when an ablation
merely shifts every contrast by one vector (its training side means no longer centre the data,
so the threshold moves; random directions do this); its AUROC, computed on the logits, ignores
such a shift.
Slow (one harvest per condition), so run only when asked.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import torch

from ppairs_lens.activations.harvest import harvest_pairs
from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.activations.prompts import Template, build_contrast_pairs
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.records import TIE, Dataset
from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.sweep_scores import score_sweep_logits
from ppairs_lens.interventions.ablation import ablation_hook_sets
from ppairs_lens.probes.sweep import SweepProbes, fit_sweep

__all__ = ["refit_rows"]

#: A condition: ``None`` (clean activations) or (direction, preset or hook names).
Condition = tuple[torch.Tensor, str | Sequence[str]] | None


def refit_rows(bridge, store: ActivationStore, train_ds: Dataset, test_ds: Dataset,
               template: Template, probes: SweepProbes, readouts: Sequence[int],
               conditions: Mapping[str, Condition], *, kinds: Sequence[str], C: float,
               positions: str, n_boot: int, seed: int,
               settings: HarvestSettings = HarvestSettings()) -> list[dict]:
    """Rows ``{dataset, condition, mode, probe_kind, layer, hook, metric, value, lo, hi,
    delta_vs_clean, n_train, n_test, hooks}``; ``probes`` were fitted on the clean train
    split at ``readouts``; ``conditions`` must include the clean one (``None``) first."""
    name = store.meta.dataset
    train_ds = replace(train_ds, records=[r for r, lab in zip(train_ds.records,
                                                              train_ds.labels()) if lab != TIE])
    both = replace(train_ds, records=train_ds.records + test_ds.records)
    pairs = build_contrast_pairs(bridge.tokenizer, both, template)
    n_tr = len(train_ds)
    y_tr, y_te = np.asarray(train_ds.labels()), np.asarray(test_ds.labels())
    groups = list(test_ds.context_ids())
    row_of = {p.pair_id: i for i, p in enumerate(store.pairs())}
    clean = store.load(list(readouts))[[row_of[r.pair_id] for r in both.records]]
    boot = dict(n_boot=n_boot, seed=seed)
    ref: dict[tuple, float] = {}
    rows = []
    for cond, spec in conditions.items():
        if spec is None:
            acts, hooks_desc = clean, ""
        else:
            r, points = spec
            hooks, final_hooks = ablation_hook_sets(bridge, r, points, positions)
            acts = harvest_pairs(bridge, pairs, settings, hooks=hooks,
                                 final_hooks=final_hooks)[:, :, list(readouts)]
            hooks_desc = points if isinstance(points, str) else "+".join(points)
        a_tr, a_te = acts[:n_tr], acts[n_tr:]
        scored = {"original": score_sweep_logits(probes, a_te, y_te, groups, **boot)}
        try:
            refit = fit_sweep(a_tr, y_tr, kinds, C=C, layers=list(readouts))
            scored["refit"] = score_sweep_logits(refit, a_te, y_te, groups, **boot)
        except ProbeError as e:
            warnings.warn(f"{name}: refit under {cond} failed: {e}")
        for mode, res in scored.items():
            for (kind, j), metrics in res.items():
                for metric, s in metrics.items():
                    key = (mode, kind, j, metric)
                    if spec is None:
                        ref[key] = s["value"]
                    rows.append({
                        "dataset": name, "condition": cond, "mode": mode, "probe_kind": kind,
                        "layer": readouts[j], "hook": store.hook_names[readouts[j]],
                        "metric": metric, "value": s["value"], "lo": s["lo"], "hi": s["hi"],
                        "delta_vs_clean": s["value"] - ref.get(key, s["value"]),
                        "n_train": n_tr, "n_test": len(test_ds), "hooks": hooks_desc})
    return rows
