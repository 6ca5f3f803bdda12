"""Held-out scores of a probe sweep computed on its logits, with bootstrap CIs.

Scoring on the logits rather than the probabilities keeps the scores meaningful when the
activations move far from where the probes were fitted (under an intervention, say): a
shifted logit can round every probability to 0 or 1, which would make every pair a tie.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.evaluation.metrics import Interval, auroc, bootstrap_ci
from ppairs_lens.probes.sweep import SweepProbes

__all__ = ["score_sweep_logits"]


def _logit_accuracy(y: np.ndarray, z: np.ndarray) -> float:
    return float(np.mean((z >= 0) == (y == 1)))


def score_sweep_logits(sweep: SweepProbes, acts: Float[Tensor, "n 2 layer d_model"],
                       labels: np.ndarray, groups: Sequence[Hashable], *, n_boot: int,
                       seed: int) -> dict[tuple[str, int], dict[str, Interval]]:
    """``{(kind, read-out position): {"accuracy", "auroc"}}`` of every probe of ``sweep``.

    Accuracy is ``logit >= 0``; AUROC is computed on the logits. Bootstrap resamples whole
    ``groups`` (contexts). Degenerate read-outs (non-finite logits) are left out.
    """
    logits = sweep.decision_function(acts)
    y = (np.asarray(labels) == 1).astype(float)
    kw = dict(n_boot=n_boot, seed=seed, groups=groups)
    out = {}
    for k in sweep.kinds:
        for j in range(sweep.n_layers):
            z = logits[k][j]
            if not np.isfinite(z).all():
                continue  # a degenerate read-out: nothing to score
            out[k, j] = {"accuracy": bootstrap_ci(_logit_accuracy, y, z, **kw),
                         "auroc": bootstrap_ci(auroc, y, z, **kw)}
    return out
