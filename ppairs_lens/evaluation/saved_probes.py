"""A store's probes fitted on its training split and saved (``--save-probes DIR``).

The store is split leak-free as every analysis splits it; the model card carries each kind's
held-out accuracy and AUROC with bootstrap CIs, at the read-out chosen on a validation split
of the training pairs (:func:`~ppairs_lens.evaluation.readout_choice.choose_readouts`).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from pathlib import Path

from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.bootstrap import ALPHA, N_BOOT
from ppairs_lens.evaluation.readout_choice import choose_readouts
from ppairs_lens.evaluation.splits import BUILTIN_TEST_SIZE
from ppairs_lens.evaluation.store_split import StoreSplit, bootstrap_groups, split_store
from ppairs_lens.evaluation.sweep_scores import score_sweep_logits
from ppairs_lens.io.atomic import check_output_folder
from ppairs_lens.probes.estimators import PROBE_KINDS
from ppairs_lens.probes.hub import write_model_card
from ppairs_lens.probes.persistence import metadata_from_store, read_metadata, save_sweep
from ppairs_lens.probes.sweep import SweepProbes, fit_sweep

__all__ = ["held_out_metrics", "save_store_probes"]


def held_out_metrics(sp: StoreSplit, sweep: SweepProbes, *, n_boot: int = N_BOOT,
                     seed: int = 0, **fit_kw) -> list[dict]:
    """Model card rows: each kind's test accuracy and AUROC with CIs at its chosen read-out."""
    choice = choose_readouts(sp, tuple(sweep.kinds), seed=seed, **fit_kw)
    groups, caption = bootstrap_groups(sp)
    scores = score_sweep_logits(sweep, sp.acts_test, sp.labels_test, groups, n_boot=n_boot,
                                seed=seed)
    rows = []
    for kind, c in choice.items():
        for metric, iv in scores.get((kind, c.index), {}).items():
            rows.append({"kind": kind, "hook": c.hook, "layer": int(sweep.layers[c.index]),
                         "metric": metric, "value": float(iv["value"]),
                         "ci_low": float(iv["lo"]), "ci_high": float(iv["hi"]),
                         "ci_level": 1 - ALPHA, "n_test": len(sp.labels_test),
                         "n_groups": int(iv.get("n_groups", 0)),
                         "ci_counts": bool(iv.get("ci_counts", False)),
                         "bootstrap": caption, "readout_chosen_by": c.selected_by})
    return rows


def save_store_probes(store, out: str | Path, *, kinds: Sequence[str] = PROBE_KINDS,
                      C: float = 1.0, standardize: bool = True, split_by: str = "auto",
                      test_size: float = BUILTIN_TEST_SIZE, seed: int = 0,
                      n_boot: int = N_BOOT) -> Path:
    """Fit ``kinds`` on every read-out of ``store``'s training split and save the sweep and its
    model card into ``out/<dataset>`` (returned); an unwritable ``out`` is refused before the
    fit."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", store.meta.dataset)
    check_output_folder(Path(out) / name, "save folder", ProbeError)
    sp = split_store(store, test_size=test_size, split_by=split_by, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # degenerate read-outs are saved as NaN
        sweep = fit_sweep(sp.acts_train, sp.labels_train, tuple(kinds), C=C,
                          standardize=standardize, model_name=store.meta.model,
                          groups=sp.groups_train, seed=seed)
    path = save_sweep(sweep, Path(out) / name, hook_names=list(store.hook_names),
                      split=sp.split_used, **metadata_from_store(store))
    metrics = held_out_metrics(sp, sweep, n_boot=n_boot, seed=seed, C=C, standardize=standardize)
    return write_model_card(path, read_metadata(path), metrics=metrics)
