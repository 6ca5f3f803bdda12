"""Every predictor's one name (probe kinds, prompted judge forms, no-model baselines), so a
predictor is called one thing in every table, figure and report.

The key is what JSON, CSV and the command line use (``length``, ``g_eval``); :func:`label`,
:func:`short` and :func:`colour` name it. Probe kinds come from their registry
(:data:`ppairs_lens.probes.estimators.KINDS`): a new kind is named there.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppairs_lens.probes.estimators import KINDS

__all__ = ["BASELINE_NAMES", "JUDGE_NAMES", "PREDICTORS", "Predictor", "colour", "label",
           "short"]


@dataclass(frozen=True)
class Predictor:
    """One predictor; ``family``: probe, judge or baseline; ``about``: what it is."""

    key: str
    label: str
    short: str
    colour: str
    family: str
    about: str


_PROBE_SHORT = {"supervised": "supervised", "pca": "PCA", "mass_mean": "mass-mean",
                "ccs": "CCS"}
_PROBE_ABOUT = {"supervised": "L2 logistic regression on the centred contrast differences",
                "pca": "the first principal component of the centred contrast differences "
                       "(labels pick only its sign and scale)",
                "mass_mean": "the difference of the class means of the contrast differences",
                "ccs": "contrast-consistent search on the centred sides (labels pick only its "
                       "sign and scale)"}

_JUDGES = (
    Predictor("zero_shot", "zero-shot (calibrated)", "zero-shot", "#7f7f7f", "judge",
              "the prompted judge's log-odds of answer 1 over 2, averaged over both orders of "
              "the pair (the paper's form)"),
    Predictor("zero_shot_threshold", "zero-shot, threshold from train", "zero-shot thr.",
              "#a5a5a5", "judge", "the calibrated zero-shot log-odds with its decision "
              "threshold fitted on the training pairs"),
    Predictor("few_shot", "few-shot (calibrated)", "few-shot", "#17becf", "judge",
              "the calibrated judge shown labelled training pairs first"),
    Predictor("allure", "ALLURE (few-shot)", "ALLURE", "#c49c94", "judge",
              "few-shot with the training pairs it got wrong as the examples"),
    Predictor("direct", "direct scoring (1-5)", "direct", "#c7c7c7", "judge",
              "each item rated alone on the 1-5 scale; the higher rating wins"),
    Predictor("g_eval", "G-Eval (expected score)", "G-Eval", "#dbdb8d", "judge",
              "direct scoring's expected score under the model's own answer probabilities"),
)
_BASELINES = (
    Predictor("memorisation", "memorisation (no model)", "memorisation", "#8c564b", "baseline",
              "training win rates of the items (or their systems, where ids recur)"),
    Predictor("length", "length (no model)", "length", "#e377c2", "baseline",
              "the longer item wins, with the sign fitted on the training pairs"),
    Predictor("lexical", "lexical (no model)", "lexical", "#bcbd22", "baseline",
              "a bag of words (word counts) of each item, logistic regression fitted on the "
              "training pairs"),
    Predictor("embedding", "input embeddings (no model)", "embeddings", "#9467bd", "baseline",
              "the items' mean-pooled input embeddings (no transformer block), logistic "
              "regression fitted on the training pairs"),
)

#: Every predictor by key: probes first, then judges, then baselines.
PREDICTORS: dict[str, Predictor] = {
    **{k: Predictor(k, c.label, _PROBE_SHORT.get(k, k), c.colour, "probe",
                    _PROBE_ABOUT.get(k, (c.__doc__ or "").strip().split("\n")[0]))
       for k, c in KINDS.items()},
    **{p.key: p for p in _JUDGES}, **{p.key: p for p in _BASELINES}}
JUDGE_NAMES: tuple[str, ...] = tuple(p.key for p in _JUDGES)
BASELINE_NAMES: tuple[str, ...] = tuple(p.key for p in _BASELINES)


def _get(key: str) -> Predictor | None:
    # a probe kind registered after this module was imported is named by its registry entry
    if key in PREDICTORS:
        return PREDICTORS[key]
    c = KINDS.get(key)
    return None if c is None else Predictor(key, c.label, key, c.colour, "probe", "")


def label(key: str) -> str:
    """The predictor's label in tables and legends (an unknown key: itself)."""
    p = _get(key)
    return p.label if p else key


def short(key: str) -> str:
    """The predictor's short tick label."""
    p = _get(key)
    return p.short if p else key


_REFERENCE_COLOURS = {"random": "#aec7e8"}   # the null directions figures draw beside them


def colour(key: str) -> str:
    """The predictor's colour in every figure (the nulls' too)."""
    p = _get(key)
    return p.colour if p else _REFERENCE_COLOURS.get(key, "#9467bd")
