"""The one bootstrap: leak groups resampled, one default, the minimum-groups flag, paired
differences on the same resamples, and no other module drawing resamples."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.bootstrap import (
    MIN_BOOTSTRAP_GROUPS,
    N_BOOT,
    bootstrap,
    intervals,
    mean_ci,
    resample_weights,
)
from ppairs_lens.evaluation.paired import paired_difference

ROOT = Path(__file__).resolve().parents[1]


def test_defaults_are_one_constant_of_at_least_2000():
    assert N_BOOT >= 2000 and MIN_BOOTSTRAP_GROUPS == 20
    assert mean_ci(np.arange(30.0))["n_boot_used"] == N_BOOT
    from analyses.ablation import AblationConfig
    from analyses.cross_dataset import TransferConfig
    from analyses.layer_sweep import SweepConfig
    from ppairs_lens.judges.probe_judge import ProbeJudgeConfig

    for cfg in (AblationConfig(stores=[]), TransferConfig(stores=[]), SweepConfig(stores=[]),
                ProbeJudgeConfig()):
        assert cfg.settings.n_boot == N_BOOT, type(cfg).__name__


def test_whole_groups_are_resampled_and_widen_clustered_intervals():
    rng = np.random.default_rng(2)
    groups = np.repeat(np.arange(20), 25)
    v = np.repeat(rng.random(20) < 0.5, 25).astype(float)     # whole groups agree
    w = resample_weights(len(v), list(groups), 50, seed=0)
    for g in range(20):                                          # a group is drawn whole
        assert (w[:, groups == g] == w[:, [25 * g]]).all()
    iid, grouped = mean_ci(v, n_boot=500), mean_ci(v, list(groups), n_boot=500)
    assert grouped["value"] == pytest.approx(iid["value"]) == pytest.approx(v.mean())
    assert grouped["hi"] - grouped["lo"] > 2 * (iid["hi"] - iid["lo"])
    with pytest.raises(ProbeError, match="group ids"):
        mean_ci(v, list(groups[:10]))


def test_fewer_groups_than_the_minimum_do_not_count():
    v = np.arange(40.0)
    few = mean_ci(v, [i % (MIN_BOOTSTRAP_GROUPS - 1) for i in range(40)], n_boot=100)
    enough = mean_ci(v, [i % MIN_BOOTSTRAP_GROUPS for i in range(40)], n_boot=100)
    assert few["n_groups"] == MIN_BOOTSTRAP_GROUPS - 1 and not few["ci_counts"]
    assert enough["ci_counts"]


def test_paired_differences_use_the_same_resamples():
    rng = np.random.default_rng(0)
    y = rng.choice([1, 2], size=200)
    groups = [i // 4 for i in range(200)]
    p_a = np.where(y == 1, 0.7, 0.3) + rng.normal(0, 0.3, 200)
    p_b = p_a + rng.normal(0, 0.05, 200)                     # nearly the same predictor
    p_a, p_b = np.clip(p_a, 0, 1), np.clip(p_b, 0, 1)
    d = paired_difference(y, p_a, p_b, groups, n_boot=500, seed=3)
    # the same draws scored twice: the interval of the difference, far narrower than either
    from ppairs_lens.evaluation.metrics import evaluate

    a = evaluate(y, p_a, groups, n_boot=500, seed=3)["accuracy"]
    assert d["hi"] - d["lo"] < 0.5 * (a["hi"] - a["lo"])
    both = intervals({"a": lambda w: w @ p_a / w.sum(1), "b": lambda w: w @ p_a / w.sum(1)},
                     200, groups, n_boot=200, seed=1)
    assert both["a"] == both["b"]
    same = bootstrap(lambda w: w @ p_a / w.sum(1) - w @ p_a / w.sum(1), 200, groups,
                     n_boot=200)
    assert same["lo"] == same["hi"] == 0.0


_DRAWS = re.compile(r"\.integers\(|\.multinomial\(|\.choice\(|default_rng\(.*\)\.(integers|choice)")


def test_only_the_bootstrap_module_draws_resamples():
    """Grep: no other module of the library or analyses/ draws random indices for a resample
    or reads the resamples itself (``resample_weights``: intervals come from
    :func:`bootstrap` / :func:`intervals` / :func:`mean_ci`). probes/sign_confidence.py draws
    its own for the sign confidence of a fit (a lower layer that cannot import evaluation)."""
    allowed = {ROOT / "ppairs_lens/evaluation/bootstrap.py",
               ROOT / "ppairs_lens/probes/sign_confidence.py"}
    # Draws that are not resamples: subsampling data, few-shot demonstrations, built-ins, the
    # random sign vectors of the sign-flip permutation test.
    not_resampling = {"ppairs_lens/judges/few_shot.py", "ppairs_lens/data/builtin.py",
                      "ppairs_lens/evaluation/sign_flip.py",
                      "ppairs_lens/data/specs.py", "ppairs_lens/data/item_sampling.py"}
    offenders = []
    for folder in ("ppairs_lens", "analyses"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if path in allowed or rel in not_resampling:
                continue
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if _DRAWS.search(line) or (path.name != "bootstrap.py"
                                           and "resample_weights" in line):
                    offenders.append(f"{rel}:{i}: {line.strip()}")
    assert not offenders, "resampling outside evaluation/bootstrap.py:\n" + "\n".join(offenders)
