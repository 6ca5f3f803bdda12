"""No-model baselines for tagging single items with an ordered level (ClimateX confidence).

Insertion scoring puts each held-out statement on a scale (low < medium < high < very high)
from the model's comparisons. Two predictors that use no model stand beside it, fitted on
training statements only:

* ``majority``: the most frequent level of the training split (the prior a tagger that reads
  nothing would answer);
* ``lexical``: TF-IDF (word 1-2 grams) multinomial logistic regression on the same labelled
  training statements the probe learns from; IPCC authors' wording ("likely", "may") could
  carry the confidence without any model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

__all__ = ["lexical_levels", "majority_level"]


def majority_level(train_levels: Sequence[int], n_test: int) -> np.ndarray:
    """The most common training level for every test item (ties: the lower level)."""
    counts = Counter(int(v) for v in train_levels)
    top = max(sorted(counts), key=lambda v: counts[v])
    return np.full(n_test, top, dtype=int)


def lexical_levels(train_texts: Sequence[str], train_levels: Sequence[int],
                   test_texts: Sequence[str], *, C: float = 1.0, seed: int = 0) -> np.ndarray:
    """Levels predicted from the statements' words (fitted on the training statements)."""
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1)
    x = vec.fit_transform(list(train_texts))
    clf = LogisticRegression(C=C, max_iter=2000, random_state=seed)
    clf.fit(x, np.asarray(train_levels, dtype=int))
    return clf.predict(vec.transform(list(test_texts))).astype(int)
