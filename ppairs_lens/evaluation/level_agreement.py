"""Ordered-level taggers (ClimateX): no-model baselines, scored as the ClimateX paper scores
them, and paired.

Insertion scoring puts each held-out statement on a scale (low < medium < high < very high).
Two predictors that use no model stand beside it, fitted on training statements only:
:func:`majority_level` (the prior a tagger that reads nothing would answer) and
:func:`lexical_levels` (IPCC authors' wording, "likely", "may", could carry the confidence
without any model).

:func:`paired_with_published` sets our tags beside a published model's on the *same* test
statements (paired difference of hits, one resample scores both). A published answer that
names no level (``idk``) counts as a miss, as in the paper's own ``correct`` column, and is
left out of its slope and bias.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from ppairs_lens.data.climatex import PublishedPredictions
from ppairs_lens.errors import DataError
from ppairs_lens.evaluation.bootstrap import ALPHA, N_BOOT, mean_ci

__all__ = ["lexical_levels", "majority_level", "slope_bias", "paired_with_published"]


def majority_level(train_levels: Sequence[int], n_test: int) -> np.ndarray:
    """The most common training level for every test item (ties: the lower level)."""
    counts = Counter(int(v) for v in train_levels)
    top = max(sorted(counts), key=lambda v: counts[v])
    return np.full(n_test, top, dtype=int)


def lexical_levels(train_texts: Sequence[str], train_levels: Sequence[int],
                   test_texts: Sequence[str], *, C: float = 1.0, seed: int = 0) -> np.ndarray:
    """Levels by TF-IDF (word 1-2 grams) multinomial logistic regression on the same labelled
    training statements the probe learns from."""
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1)
    x = vec.fit_transform(list(train_texts))
    clf = LogisticRegression(C=C, max_iter=2000, random_state=seed)
    clf.fit(x, np.asarray(train_levels, dtype=int))
    return clf.predict(vec.transform(list(test_texts))).astype(int)


def slope_bias(pred_levels: Sequence[float], true_levels: Sequence[float]) -> tuple[float, float]:
    """Slope and bias of predicted against true levels, as the ClimateX paper defines them.

    Why: correlation hides systematic over- or under-confidence. Per true level the mean
    predicted level is taken; ``slope`` is the least-squares slope of those means on the
    levels (1 is ideal, 0 random, < 1 compressed towards the middle) and ``bias`` the mean over
    levels of (mean prediction - level) (0 is ideal). Each level present weighs the same, so
    a test split with 50 / 100 / 100 / 50 statements per level gives what the paper printed:
    the paper's own GPT-4 predictions give exactly its slopes 0.223 / 0.323 and biases 0.042 /
    0.083 this way (a line through every statement gives 0.231 / 0.336 and 0.063 / 0.103).
    Levels are numbers (indices 0..3); slope is ``nan`` with fewer than two true levels.
    """
    p = np.asarray(pred_levels, dtype=float)
    t = np.asarray(true_levels, dtype=float)
    if p.shape != t.shape or p.ndim != 1:
        raise ValueError(f"need two 1-d sequences of equal length, got {p.shape} and {t.shape}")
    if p.size == 0:
        raise ValueError("no levels given")
    levels = np.unique(t)
    means = np.array([p[t == lv].mean() for lv in levels])
    bias = float(np.mean(means - levels))
    lc = levels - levels.mean()
    denom = float(np.dot(lc, lc))
    slope = float(np.dot(lc, means - means.mean()) / denom) if denom > 0 else math.nan
    return slope, bias


def paired_with_published(ours: Mapping[str, int], true: Mapping[str, int],
                          theirs: PublishedPredictions, *, n_boot: int = N_BOOT, seed: int = 0,
                          alpha: float = ALPHA) -> dict:
    """Our level per statement id (``ours``) against ``theirs`` on the same statements:
    ``n``, ``n_unparsed`` (their answers that named no level), ``ours_accuracy``,
    ``theirs_accuracy``, ``difference`` (ours - theirs) with ``lo`` / ``hi`` / ``ci_counts``
    (statements resampled, both scored on each resample), ``ours_slope`` / ``ours_bias`` and
    ``theirs_slope`` / ``theirs_bias`` (:func:`slope_bias`, on these statements)."""
    ids = list(ours)
    missing = [i for i in ids if i not in theirs.levels]
    if missing:
        raise DataError(f"{len(missing)} of our {len(ids)} test statements have no published "
                        f"prediction (e.g. statement_idx {missing[0]!r}): not the paper's test "
                        "split?", file=theirs.path, field="statement_idx")
    y = np.array([true[i] for i in ids])
    a = np.array([ours[i] for i in ids])
    b = [theirs.levels[i] for i in ids]
    hit_a = (a == y).astype(float)
    hit_b = np.array([v is not None and v == t for v, t in zip(b, y)], dtype=float)
    d = mean_ci(hit_a - hit_b, n_boot=n_boot, seed=seed, alpha=alpha)
    parsed = [k for k, v in enumerate(b) if v is not None]
    s_a, b_a = slope_bias(a, y)
    s_b, b_b = slope_bias([b[k] for k in parsed], y[parsed]) if parsed else (math.nan, math.nan)
    return {"versus": f"{theirs.model} {theirs.setting}", "model": theirs.model,
            "setting": theirs.setting, "n": len(ids), "n_unparsed": len(ids) - len(parsed),
            "ours_accuracy": float(hit_a.mean()), "theirs_accuracy": float(hit_b.mean()),
            "difference": d["value"], "lo": d["lo"], "hi": d["hi"],
            "ci_counts": bool(d.get("ci_counts", False)), "n_groups": d.get("n_groups"),
            "ours_slope": s_a, "ours_bias": b_a, "theirs_slope": s_b, "theirs_bias": b_b}
