"""A store's probes fitted on its training split and saved (``--save-probes DIR``).

:func:`save_store_probes` splits a store leak-free (as every analysis does,
:func:`ppairs_lens.evaluation.store_split.split_store`), fits every probe kind on every
read-out of the training split and saves the sweep with its metadata
(:mod:`ppairs_lens.probes.persistence`) into ``DIR/<dataset>``.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from pathlib import Path

from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.store_split import split_store
from ppairs_lens.io.atomic import check_output_folder
from ppairs_lens.probes.estimators import PROBE_KINDS
from ppairs_lens.probes.persistence import metadata_from_store, save_sweep
from ppairs_lens.probes.sweep import fit_sweep

__all__ = ["save_store_probes"]


def save_store_probes(store, out: str | Path, *, kinds: Sequence[str] = PROBE_KINDS,
                      C: float = 1.0, standardize: bool = True, split_by: str = "auto",
                      test_size: float = 0.3, seed: int = 0) -> Path:
    """Fit ``kinds`` on every read-out of ``store``'s training split and save the sweep into
    ``out/<dataset>``; returns that folder (load it with
    :func:`ppairs_lens.probes.persistence.load_sweep`); ``out`` that is a file or cannot be
    written is refused before the fit."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", store.meta.dataset)
    check_output_folder(Path(out) / name, "save folder", ProbeError)
    sp = split_store(store, test_size=test_size, split_by=split_by, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # degenerate read-outs are saved as NaN
        sweep = fit_sweep(sp.acts_train, sp.labels_train, tuple(kinds), C=C,
                          standardize=standardize, model_name=store.meta.model,
                          groups=sp.groups_train, seed=seed)
    return save_sweep(sweep, Path(out) / name, hook_names=list(store.hook_names),
                      split=str(getattr(sp, "split_used", split_by)), **metadata_from_store(store))
