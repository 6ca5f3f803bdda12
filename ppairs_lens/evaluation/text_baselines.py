"""No-model baselines that read the items' texts, fitted on the training split only.

A probe on the model's residual stream means something only if it beats what can be read off
the words themselves. Two such readers, each a :class:`Baseline` scored by the code that
scores a probe:

* :func:`lexical_baseline`: a unigram bag of words (every word of the training texts kept: no
  document-frequency pruning, which on ~56 training texts removed most of the vocabulary),
  item 1 minus item 2, logistic regression.
* :func:`embedding_baseline`: the model's input embedding ``W_E`` mean-pooled over each item's
  tokens, item 1 minus item 2, logistic regression. This stands for "the read-out before
  block 0": at the contrast token that read-out is the embedding of the choice token itself,
  the same for every pair, so it is chance by construction. Pooling over the items sees their
  tokens and no computation, which is the question that read-out was meant to ask.

Comparisons are fitted without intercept on the training pairs in both orders, ``(x, y)`` and
``(-x, 1 - y)`` (solved as the equivalent one-order fit with ``2 C``), so that swapping the two
items gives exactly ``1 - p``: the baseline cannot win by learning that item 1 tends to be the
better one. Statements get an intercept. ``C`` is chosen from :data:`C_GRID` by
cross-validation on the training records, folds by leak group (``group_id``, else
``context_id``, else ``pair_id``), so a group never informs its own score; ``train_accuracy``
is that CV accuracy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch
from jaxtyping import Float
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedGroupKFold
from threadpoolctl import threadpool_limits
from torch import Tensor

from ppairs_lens.data.records import ITEM1, ITEM2, TIE, Comparison, Dataset, Statement
from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.baselines import Baseline
from ppairs_lens.evaluation.metrics import accuracy
from ppairs_lens.evaluation.store_split import split_records

__all__ = ["HeldOutTextBaselines", "held_out_text_baselines", "lexical_baseline",
           "embedding_baseline", "text_baselines", "C_GRID", "MAX_FOLDS"]

#: Inverse L2 strengths tried; the smallest of the best is kept (ties go to more regularising).
C_GRID: tuple[float, ...] = (0.001, 0.01, 0.1, 1.0, 10.0, 100.0)
#: Folds of the grouped cross-validation that chooses C (fewer when there are fewer groups).
MAX_FOLDS = 5

Record = Comparison | Statement
Features = np.ndarray | sp.spmatrix
Embedding = Float[Tensor, "vocab d_model"] | Float[np.ndarray, "vocab d_model"]


def _kind(records: Sequence[Record], what: str) -> str:
    if all(isinstance(r, Comparison) for r in records):
        return "comparison"
    if all(isinstance(r, Statement) for r in records):
        return "statement"
    raise ProbeError(f"{what} mixes comparisons and statements (or holds other records)")


def _targets(records: Sequence[Record], y: Sequence[int], kind: str) -> np.ndarray:
    """0/1 targets: 1 = item 1 better, or true."""
    y = list(y)
    if len(y) != len(records):
        raise ProbeError(f"{len(records)} training records but {len(y)} labels")
    if kind == "statement":       # Dataset.labels(): 1 true, 2 false; bools accepted too
        bad = [v for v in y if v not in (ITEM1, ITEM2, True, False)]
        if bad:
            raise ProbeError(f"statement labels must be 1 (true) / 2 (false) or bools, got "
                             f"{bad[:5]}")
        return np.array([1 if (v is True or v == ITEM1) else 0 for v in y])
    ties = sum(1 for v in y if v == TIE)
    if ties:
        raise ProbeError(f"{ties} training comparisons are ties (label 0): a text baseline "
                         "predicts which item is better, so drop ties first (text_baselines "
                         "does)")
    bad = [v for v in y if v not in (ITEM1, ITEM2)]
    if bad:
        raise ProbeError(f"comparison labels must be 1 (item 1 better) or 2, got {bad[:5]}")
    return np.array([1 if v == ITEM1 else 0 for v in y])


def _groups(records: Sequence[Record]) -> np.ndarray:
    return np.array([r.group_id or r.context_id or r.pair_id for r in records])


def _texts(records: Sequence[Record], kind: str) -> list[tuple[str, ...]]:
    if kind == "statement":
        return [(r.statement,) for r in records]
    return [(r.item1, r.item2) for r in records]


def _pair_features(rows: Features, index: dict[str, int], texts: list[tuple[str, ...]],
                   kind: str) -> Features:
    """Rows of the unique texts -> one row per record: the statement, or item 1 - item 2."""
    first = [index[t[0]] for t in texts]
    if kind == "statement":
        return rows[first]
    return rows[first] - rows[[index[t[1]] for t in texts]]


def _logistic(C: float, antisymmetric: bool, seed: int) -> LogisticRegression:
    """Both orders, ``(x, y)`` and ``(-x, 1 - y)``, without intercept: each pair's two
    log-losses are equal, so that fit is exactly this one on ``(x, y)`` with ``2 C`` (half
    the rows to fit). ``warm_start``: the C grid is walked upwards from the last solution."""
    return LogisticRegression(C=2 * C if antisymmetric else C, fit_intercept=not antisymmetric,
                              max_iter=2000, random_state=seed, warm_start=True)


def _choose_C(X: Features, t: np.ndarray, groups: np.ndarray, antisymmetric: bool,
              seed: int) -> tuple[float, float, int]:
    """``(C, CV accuracy, folds)`` by grouped CV (NaN: too few groups to cross-validate, C = 1)."""
    k = min(MAX_FOLDS, len(set(groups)))
    if k < 2:
        return 1.0, float("nan"), 0
    if antisymmetric:             # groups shuffled by seed, dealt round-robin into k folds
        # (GroupKFold shuffles only from scikit-learn 1.6)
        uniq = np.unique(groups)
        fold_of = dict(zip(np.random.default_rng(seed).permutation(uniq),
                           np.arange(len(uniq)) % k))
        f = np.array([fold_of[g] for g in groups])
        folds = [(np.flatnonzero(f != j), np.flatnonzero(f == j)) for j in range(k)]
    else:
        cv = StratifiedGroupKFold(k, shuffle=True, random_state=seed)
        folds = list(cv.split(X, t, groups))
    folds = [(a, b) for a, b in folds if len(set(t[a])) == 2]  # a one-class fold fits nothing
    if not folds:
        return 1.0, float("nan"), 0
    correct = np.zeros(len(C_GRID))
    for a, b in folds:
        model = _logistic(C_GRID[0], antisymmetric, seed)
        for j, C in enumerate(C_GRID):
            model.set_params(C=2 * C if antisymmetric else C).fit(X[a], t[a])
            correct[j] += accuracy(t[b], model.predict_proba(X[b])[:, 1]) * len(b)
    acc = correct / sum(len(b) for _, b in folds)
    j = int(np.argmax(acc))                   # first of the best: the smallest C
    return C_GRID[j], float(acc[j]), len(folds)


def _fit_baseline(kind_name: str, X_tr: Features, t: np.ndarray, groups: np.ndarray,
                  X_te: Features, antisymmetric: bool, seed: int,
                  describe: str) -> Baseline:
    if not antisymmetric and len(set(t)) < 2:
        return Baseline(kind_name, None, describe, reason="the training statements are all "
                        "true or all false: nothing to fit")
    # Small fits: a multi-threaded BLAS thrashes on a shared CPU (~50x slower measured).
    with threadpool_limits(limits=1):
        C, cv_acc, k = _choose_C(X_tr, t, groups, antisymmetric, seed)
        model = _logistic(C, antisymmetric, seed).fit(X_tr, t)
        p = model.predict_proba(X_te)[:, 1] if X_te.shape[0] else np.empty(0)
    how = ("both item orders, no intercept" if antisymmetric else "with intercept")
    cv = (f"C={C:g} by {k}-fold grouped CV on train, CV acc {cv_acc:.3f}" if k
          else "C=1 (too few leak groups to cross-validate)")
    return Baseline(kind_name, np.asarray(p, dtype=np.float64),
                    f"{describe}; logistic regression ({how}); {cv}", cv_acc)


def _setup(train: Sequence[Record], y_train: Sequence[int],
           test: Sequence[Record]) -> tuple[str, np.ndarray, list, list]:
    if not len(train):
        raise ProbeError("no training records")
    kind = _kind(train, "the training split")
    if len(test) and _kind(test, "the test split") != kind:
        raise ProbeError(f"training records are {kind}s but test records are not")
    return kind, _targets(train, y_train, kind), _texts(train, kind), _texts(test, kind)


def lexical_baseline(train: Sequence[Record], y_train: Sequence[int],
                     test: Sequence[Record], *, seed: int = 0) -> Baseline:
    """The bag of words (module doc): P(item 1), or P(true), per test record. ``y_train``: 1 / 2
    per comparison (ties refused); for statements 1 = true, 2 = false. Test words the training
    texts lack are ignored. Counts, not TF-IDF, so that item 1 minus item 2 also carries the
    length difference a plain bag of words sees."""
    kind, t, tx_tr, tx_te = _setup(train, y_train, test)
    uniq_tr = sorted({s for tx in tx_tr for s in tx})
    try:
        vec = CountVectorizer(ngram_range=(1, 1), min_df=1, lowercase=True,
                              token_pattern=r"(?u)\b\w+\b").fit(uniq_tr)
    except ValueError:
        return Baseline("lexical", None, "", reason="the training texts hold no words")
    uniq = sorted(set(uniq_tr) | {s for tx in tx_te for s in tx})
    rows = vec.transform(uniq).tocsr().astype(np.float64)
    index = {s: i for i, s in enumerate(uniq)}
    X_tr = _pair_features(rows, index, tx_tr, kind)
    X_te = _pair_features(rows, index, tx_te, kind) if tx_te else rows[:0]
    what = "item 1 minus item 2" if kind == "comparison" else "the statement"
    describe = (f"unigram bag of words (counts) of {what} ({len(vec.vocabulary_)} words, "
                "every word of the training texts kept)")
    return _fit_baseline("lexical", X_tr, t, _groups(train), X_te, kind == "comparison",
                         seed, describe)


def _mean_embeddings(embedding: Embedding,
                     ids: list[list[int]]) -> Float[np.ndarray, " n d_model"]:
    """Mean of the embedding rows of each text's tokens (zeros for none); only the rows used
    are gathered, so a GPU ``W_E`` is not copied whole."""
    vocab, d = int(embedding.shape[0]), int(embedding.shape[1])
    used = sorted({i for seq in ids for i in seq})
    if used and (used[0] < 0 or used[-1] >= vocab):
        raise ProbeError(f"token id {used[-1]} is outside the embedding's {vocab} rows: the "
                         "tokenizer and the embedding come from different models")
    if isinstance(embedding, Tensor):                # model.W_E, maybe on a GPU
        sub = embedding.detach()[torch.as_tensor(used, dtype=torch.long,
                                                 device=embedding.device)]
        sub = sub.to("cpu", torch.float64).numpy()
    else:
        sub = np.asarray(embedding, dtype=np.float64)[used]
    where = {tok: k for k, tok in enumerate(used)}
    out = np.zeros((len(ids), d))
    for n, seq in enumerate(ids):
        if seq:
            out[n] = sub[[where[i] for i in seq]].mean(axis=0)
    return out


def embedding_baseline(embedding: Embedding, tokenizer, train: Sequence[Record],
                       y_train: Sequence[int], test: Sequence[Record], *,
                       seed: int = 0) -> Baseline:
    """The input-embedding baseline (module doc); ``embedding``: ``W_E`` ``[vocab, d_model]``
    (``model.W_E`` of a TransformerBridge or a HookedTransformer), a tensor or an array;
    ``tokenizer(texts, add_special_tokens=False)["input_ids"]`` gives each item's tokens.
    Features are scaled by their training RMS (one number) so that :data:`C_GRID` means the
    same for every model."""
    kind, t, tx_tr, tx_te = _setup(train, y_train, test)
    uniq = sorted({s for tx in (*tx_tr, *tx_te) for s in tx})
    ids = list(tokenizer(uniq, add_special_tokens=False)["input_ids"]) if uniq else []
    rows = _mean_embeddings(embedding, ids)
    index = {s: i for i, s in enumerate(uniq)}
    X_tr = _pair_features(rows, index, tx_tr, kind)
    X_te = _pair_features(rows, index, tx_te, kind) if tx_te else rows[:0]
    rms = float(np.sqrt(np.mean(X_tr ** 2))) or 1.0
    what = "item 1 minus item 2" if kind == "comparison" else "the statement"
    describe = (f"input embedding W_E ({rows.shape[1]} dims) mean-pooled over the tokens of "
                f"{what}, no block run (the literal pre-block-0 read-out at the contrast "
                "token is the choice token's embedding, the same for every pair)")
    return _fit_baseline("embedding", X_tr / rms, t, _groups(train), X_te / rms,
                         kind == "comparison", seed, describe)


def _no_ties(ds: Dataset) -> tuple[list[Record], list[int]]:
    keep = [(r, y) for r, y in zip(ds.records, ds.labels()) if y != TIE]
    return [r for r, _ in keep], [y for _, y in keep]


def text_baselines(train: Dataset, test: Dataset, *, embedding: Embedding | None = None,
                   tokenizer=None, seed: int = 0) -> list[Baseline]:
    """The lexical baseline, and the embedding baseline when ``embedding`` is given; ties are
    dropped first, so each ``p`` aligns with ``test``'s non-tie records, in their order."""
    if embedding is not None and tokenizer is None:
        raise ProbeError("the embedding baseline needs the tokenizer of the embedding's model")
    if train.kind != test.kind:
        raise ProbeError(f"train is {train.kind} data but test is {test.kind} data")
    tr, y_tr = _no_ties(train)
    te, _ = _no_ties(test)
    out = [lexical_baseline(tr, y_tr, te, seed=seed)]
    if embedding is not None:
        out.append(embedding_baseline(embedding, tokenizer, tr, y_tr, te, seed=seed))
    return out


@dataclass(frozen=True)
class HeldOutTextBaselines:
    """P(item 1) per held-out pair id of each text baseline (None: it cannot be built here)."""

    lexical: dict[str, float] | None = None
    embedding: dict[str, float] | None = None

    def p_by_pair(self) -> dict[str, dict[str, float]]:
        """Under the keys the layer sweep reads (``analyses.layer_sweep.TEXT_BASELINES``)."""
        return {f"{k}_p_by_pair": v for k, v in (("lexical", self.lexical),
                                                 ("embedding", self.embedding)) if v is not None}


def held_out_text_baselines(pairs: Sequence, dataset: Dataset, *,
                            embedding: Embedding | None = None, tokenizer=None,
                            test_size: float, split_by: str = "auto", seed: int = 0
                            ) -> HeldOutTextBaselines:
    """The text baselines fitted on the training side of ``pairs``' split and their P(item 1)
    on each held-out pair: the one place every command computes them."""
    train, test, _ = split_records(pairs, dataset, test_size=test_size, split_by=split_by,
                                   seed=seed)
    ids = [r.pair_id for r in test.records]
    return HeldOutTextBaselines(**{b.kind: dict(zip(ids, map(float, b.p)))
                                   for b in text_baselines(train, test, embedding=embedding,
                                                           tokenizer=tokenizer, seed=seed)
                                   if b.available})
