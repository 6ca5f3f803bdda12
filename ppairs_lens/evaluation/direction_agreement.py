"""Do probes fitted on different datasets find the same direction? Decided at one read-out.

For each probe kind: each dataset's direction at read-out ``li``, its in-distribution
held-out accuracy there (CI over the split's bootstrap unit), and its training contrast
differences centred within each label (the covariance null: the stream's own spread of
contrasts, less the label signal itself, which would otherwise hand the null the very
direction being tested), handed to
:func:`ppairs_lens.evaluation.cosine_verdict.cosine_agreement_verdict`. Only probes that work in
distribution (CI lower end above chance) count: directions of probes that do not work say
nothing about whether the model's representations agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from jaxtyping import Float
from torch import Tensor


from ppairs_lens.evaluation.metrics import evaluate
from ppairs_lens.evaluation.store_split import StoreSplit, bootstrap_groups
from ppairs_lens.evaluation.cosine_verdict import cosine_agreement_verdict
from ppairs_lens.probes.sweep import SweepProbes, fit_sweep

__all__ = ["agreement_verdicts", "in_distribution_accuracy", "pc1_alignment"]


def in_distribution_accuracy(split: StoreSplit, sweep: SweepProbes, kind: str, li: int, *,
                             n_boot: int, seed: int) -> dict[str, float] | None:
    """``{value, lo, hi}``: held-out accuracy of ``kind``'s probe at read-out ``li`` on its own
    test split (None where the probe is degenerate there)."""
    if bool(sweep.degenerate[kind][li]):
        return None
    p = sweep.to_probe(kind, li).predict_proba(split.acts_test[:, :, li])[:, 1]
    acc = evaluate(split.labels_test, p, groups=bootstrap_groups(split)[0], n_boot=n_boot,
                   seed=seed)["accuracy"]
    return {"value": acc["value"], "lo": acc["lo"], "hi": acc["hi"],
            "n_groups": acc.get("n_groups")}


def _within_label(split: StoreSplit, li: int) -> np.ndarray:
    """Training contrast differences at ``li``, each label's mean removed."""
    x = (split.acts_train[:, 0, li] - split.acts_train[:, 1, li]).double().numpy()
    y = np.asarray(split.labels_train)
    for lab in np.unique(y):
        x[y == lab] -= x[y == lab].mean(0)
    return x


def agreement_verdicts(stores: Sequence[tuple[str, StoreSplit, SweepProbes]],
                       kinds: Sequence[str], li: int, *, n_boot: int, seed: int,
                       n_sim: int = 2000, alpha: float = 0.01) -> dict[str, dict]:
    """Per kind: the agreement verdict (``Verdict.as_dict()``) at read-out ``li`` over
    ``(name, split, sweep)`` of every dataset, with ``in_distribution`` accuracies."""
    out = {}
    for kind in kinds:
        accs = {n: in_distribution_accuracy(sp, sw, kind, li, n_boot=n_boot, seed=seed)
                for n, sp, sw in stores}
        dirs = [sw.directions[kind][li].double().numpy() for _, _, sw in stores]
        feats = [_within_label(sp, li) for _, sp, _ in stores]
        v = cosine_agreement_verdict(
            dirs, [a["lo"] if a else None for a in accs.values()],
            accuracy_groups=[a["n_groups"] if a else None for a in accs.values()],
            features=feats,
            names=[n for n, _, _ in stores], n_sim=n_sim, seed=seed, alpha=alpha)
        out[kind] = {**v.as_dict(), "in_distribution": accs}
    return out


def pc1_alignment(acts: Float[Tensor, "n 2 layer d"], labels: Sequence[int], layer: int, *,
                  kind: str, seed: int = 0) -> float:
    """``|cos|`` between ``kind``'s direction and the first principal component of the same
    pairs' centred differences at read-out ``layer`` (thesis Section 4.3.3: the probe lies
    close to PC1), both fitted on all of them. A value, not an estimate with an interval: a
    direction refitted on a few hundred comparisons that share their items has a cosine
    biased away from the population's, and this package has no interval of known coverage
    for such a statistic, so it gives none."""
    kinds = tuple(dict.fromkeys((kind, "pca")))
    sw = fit_sweep(acts[:, :, layer:layer + 1], np.asarray(labels), kinds=kinds,
                   n_sign_boot=1, seed=seed)
    u, v = (sw.directions[k][0].double() for k in (kind, "pca"))
    return float((u @ v).abs() / (u.norm() * v.norm()))
