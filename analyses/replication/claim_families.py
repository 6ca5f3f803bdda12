"""The families of claims and the records the claims registry is made of.

A :class:`Family` gives its claims' rule (beats, unchanged, changes), its smallest effect of
interest δ with the reason for it, the bound of one group's difference (what the margin test
needs), and whether it holds our own further questions (``ours``: decided on any model,
reported apart, never counted as the seeds'). Holm runs within a family. A :class:`Scope` is
the models a published claim was made for: a run on another model reports the claim's
statistic with the verdict *outside the claim's scope*.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["FAMILIES", "MIN_SORTED_ITEMS", "PROBES", "SCOPES", "Claim", "Family", "Scope",
           "model_key"]

#: The probe kinds the claims name, with their names in the report.
PROBES = {"supervised": "supervised probe", "pca": "unsupervised (PCA) probe"}


def model_key(name: str) -> str:
    """A model's name as its letters and digits, lower case (``Llama-3.1-70B`` ->
    ``llama3170b``), what :class:`Scope` matches against."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


@dataclass(frozen=True)
class Scope:
    """``models`` as the source names them, ``keys`` what a run's model name must contain
    (:func:`model_key`) to be one of them."""

    models: str
    keys: tuple[str, ...]

    def covers(self, model: str | None) -> bool:
        k = model_key(model or "")
        return any(key in k for key in self.keys)


_GEMMA2 = ("gemma22b", "gemma29b", "gemma227b")
_LLAMA31 = ("llama318b", "llama3170b")
#: The models each kind of published claim was made for (``../shared/seeds``: the paper lists
#: its families in its Section 4 model list; the thesis names its three in Section 4.1).
SCOPES: dict[str, Scope] = {
    "paper": Scope("the paper's models (Llama 3.1 8B/70B, Gemma 2 2B/9B/27B, Qwen 2.5 "
                   "1.5B-72B; its fourth family unnamed in the text, Mistral by its references), "
                   "without Qwen 2.5 0.5B, the stated exception",
                   _LLAMA31 + _GEMMA2 + tuple(f"qwen25{n}binstruct" for n in
                                              ("15", "3", "7", "14", "32", "72"))
                   + ("mistralnemo", "mistralsmall24b", "mistrallarge")),
    "paper 70B": Scope("Llama 3.1 70B", ("llama3170b",)),
    "paper Gemma 2": Scope("Gemma 2 2B, 9B and 27B", _GEMMA2),
    "paper Gemma 2 and Llama 3.1": Scope("Gemma 2 2B/9B/27B and Llama 3.1 8B/70B",
                                         _GEMMA2 + _LLAMA31),
    "thesis": Scope("Mistral-7B-Instruct-v0.1, Llama-2-7B-chat, Llama-3-8B-Instruct",
                    ("mistral7binstructv01", "llama27bchat", "llama38binstruct")),
    "thesis Llama 3": Scope("Llama-3-8B-Instruct", ("llama38binstruct",)),
    "paper Qwen 0.5B": Scope("Qwen 2.5 0.5B (the paper's stated exception)",
                             ("qwen2505binstruct", "qwen2505b")),
}


@dataclass(frozen=True)
class Family:
    """``bound``: the largest absolute group difference of its statistic."""

    name: str
    kind: str                 # beats | unchanged | changes
    delta: float | None
    unit: str
    why: str
    bound: float = 1.0
    ours: bool = False


_ACC = "5 points of pairwise accuracy (one pair in 20): a smaller gap between two judges would " \
       "not change which one to use"
FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("ours: controls", "beats", 0.05, "pairwise accuracy",
           "the resolution of every comparison of methods here: controls are decided by the "
           "same rule as the claims they vouch for", ours=True),
    Family("probe vs prompting", "beats", 0.05, "pairwise accuracy", _ACC),
    Family("supervised vs unsupervised", "beats", 0.05, "pairwise accuracy",
           "as for probes against prompting: the same figures, the same resolution"),
    Family("supervised as unsupervised", "unchanged", 0.05, "pairwise accuracy",
           "two probes within 5 points of each other are alike at the resolution of every "
           "comparison of methods here"),
    Family("thesis Table 4.1", "beats", 0.05, "pairwise accuracy", _ACC),
    Family("thesis Table 4.3", "beats", 0.05, "pairwise accuracy", _ACC),
    Family("thesis Table 4.2", "beats", 0.15, "Spearman after sorting",
           "what 5 points of pairwise accuracy make in rank correlation: Kendall's tau = "
           "2 acc - 1 moves by 0.1, and Spearman's rho is about 1.5 tau for the weak "
           "correlations of these tables", bound=2.0),
    Family("probe vs finetuning", "beats", 0.05, "pairwise accuracy", "as for prompting"),
    Family("ClimateX", "beats", 0.05, "level accuracy",
           "5 points of a 4-level tagging accuracy (GPT-4's two settings differ by 2.7)"),
    Family("robustness to shift", "beats", 0.05, "accuracy drop",
           "a drop 5 points of accuracy smaller, the same smallest effect as for the other "
           "comparisons of methods", bound=2.0),
    Family("transfer across datasets", "beats", 0.05, "pairwise accuracy minus chance",
           "a probe carried to another dataset must beat a coin by 5 points, the resolution "
           "of every other comparison of methods here; table1.pca-reaches-0.95 alone is read "
           "against 0.95, not chance, by its cells (its method says how)"),
    Family("transfer: unsupervised above supervised", "beats", 0.05, "pairwise accuracy",
           "the paper says slightly: a gap under 5 points is reported as beats, by less than "
           "the margin"),
    Family("layer profile: plateau", "unchanged", 0.05, "pairwise accuracy",
           "a layer within 5 points of the deeper layers' mean is on the plateau: the same "
           "resolution as the comparisons of methods"),
    Family("layer profile: at its best", "beats", 0.05, "pairwise accuracy",
           "non-inferiority: the last layer minus the other deeper layers' mean, plus 0.05; it "
           "holds where the last layer is credibly no more than 5 points below them and fails "
           "where it is credibly below them"),
    Family("no gain on the smallest model", "unchanged", 0.05, "pairwise accuracy",
           "the paper's exception: within 5 points of prompting is no gain at the resolution of "
           "its other comparisons"),
    Family("layer profile: halves", "beats", 0.05, "pairwise accuracy",
           "the resolution of every comparison of methods here, applied to two halves of one "
           "probe's layers"),
    Family("task contrast", "beats", 0.05, "difference of pairwise-accuracy gaps",
           "a gap 5 points larger on one task than on the other: the resolution of the "
           "comparisons it contrasts", bound=2.0),
    Family("drop under shift", "beats", 0.05, "accuracy drop",
           "a drop under 5 points is no drop at the resolution of the comparisons of methods"),
    Family("level as published", "unchanged", 0.05, "pairwise accuracy",
           "a level within 5 points of the published one reproduces it at the resolution of "
           "every comparison of methods here"),
    Family("across models", "beats", 0.05, "pairwise accuracy",
           "claims across models; a run harvests one model, so none is tested here"),
    Family("layer profile: jump", "beats", 0.1, "pairwise accuracy",
           "a rise under 0.1 (a third of the published ~0.3, from ~0.5 to ~0.8) is no jump"),
    Family("ablation leaves the judgement unchanged", "unchanged", 0.05, "ΔF1 (macro)",
           "the ablation's own equivalence margin (±0.05 of ΔF1, ±0.2 log-odds)"),
    Family("directions agree", "beats", 0.05, "median |cos| minus 0.7",
           "the paper's own threshold (most |cos| above 0.7: the median above it); a median "
           "credibly under 0.75 and not credibly over 0.7 fails, at 5 points' resolution"),
    Family("directions centre on zero", "unchanged", 0.1, "mean |cos|",
           "a mean |cos| within 0.1 of 0 is directions that share nothing worth a figure"),
    # ours: questions the seeds do not ask, decided on any model
    Family("ours: probe vs no-model baselines", "beats", 0.05, "accuracy",
           "a probe less than 5 points above what the words alone give adds nothing worth "
           "reporting", ours=True),
    Family("ours: PPAIRS vs G-Eval", "beats", 0.05, "pairwise accuracy", _ACC, ours=True),
    Family("ours: ClimateX against published taggers", "beats", 0.05, "level accuracy",
           "as for the thesis's comparison with GPT-4 few-shot", ours=True),
    Family("ours: interventions change the judgement", "changes", 0.05, "Δaccuracy",
           "changes smaller than the ablation's margin are no change; fails only by "
           "equivalence", ours=True),
    Family("ours: other directions leave the judgement unchanged", "unchanged", 0.05,
           "ΔF1 (macro)", "the ablation's own equivalence margin", ours=True),
    Family("ours: unsupervised transfer costs nothing", "unchanged", 0.05, "pairwise accuracy",
           "Table 1's unsupervised cells barely move along a row; 5 points is the smallest gap "
           "between two judges worth reporting", ours=True),
)}


#: Thesis Table 4.2 takes Spearman against the humans over each article's sorted summaries,
#: without saying how many (SummEval's file has 16, NEWSROOM's 7). A Spearman over a few is
#: another statistic (over 3 it is only ±0.5 or ±1, nearly Table 4.1's pairwise accuracy), so
#: a claim on it is tested only where every article sorts at least this many.
MIN_SORTED_ITEMS: int = 7


@dataclass(frozen=True)
class Claim:
    """One claim: ``source`` its document and place, ``comparison`` ``(dataset, A, B,
    statistic)``, ``scope`` None for our own questions (any model), ``read`` its reader in the
    registry's ``READERS`` (given ``args``), ``step`` the run's step that computes it."""

    id: str
    source: str
    statement: str
    family: str
    statistic: str
    datasets: tuple[str, ...]
    needs: str
    comparison: tuple[str, str, str, str]
    read: str
    args: tuple = ()
    scope: Scope | None = None
    step: str = ""

    @property
    def delta(self) -> float | None:
        return FAMILIES[self.family].delta
