"""The families of published claims and the claim record the registry (``analyses/claims.py``)
is made of: each family's rule (beats, unchanged, changes), its smallest effect of interest δ
and the one-line reason for it; Holm runs within a family. Beside the published numbers
(:mod:`ppairs_lens.evaluation.published`), as they are the protocol, not an experiment.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FAMILIES", "MIN_SORTED_ITEMS", "Claim", "Family"]


@dataclass(frozen=True)
class Family:
    """Claims decided by one rule, with one δ, Holm-corrected together."""

    name: str
    kind: str                 # beats | unchanged | changes
    delta: float | None
    unit: str
    why: str


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("probe vs prompting", "beats", 0.05, "pairwise accuracy",
           "5 points of pairwise accuracy (one pair in 20): a smaller gap between two judges "
           "would not change which one to use"),
    Family("supervised vs unsupervised", "beats", 0.05, "pairwise accuracy",
           "as for probes against prompting: the same figures, the same resolution"),
    Family("probe vs no-model baselines", "beats", 0.05, "accuracy",
           "a probe less than 5 points above what the words alone give adds nothing worth "
           "reporting"),
    Family("thesis Table 4.1", "beats", 0.05, "pairwise accuracy",
           "5 points of pairwise accuracy, the same smallest effect as for the paper's "
           "comparisons of methods"),
    Family("thesis Table 4.2", "beats", 0.1, "Spearman after sorting",
           "0.1 of rank correlation: what 5 points of pairwise accuracy make in Kendall's "
           "tau (tau = 2 acc - 1), the same smallest effect as Table 4.1"),
    Family("probe vs finetuning", "beats", 0.05, "pairwise accuracy", "as for prompting"),
    Family("ClimateX", "beats", 0.05, "level accuracy",
           "5 points of a 3-level tagging accuracy (GPT-4's two settings differ by 2.7)"),
    Family("robustness to shift", "beats", 0.05, "accuracy drop",
           "a drop 5 points of accuracy smaller, the same smallest effect as for the other "
           "comparisons of methods"),
    Family("transfer across datasets", "beats", 0.05, "pairwise accuracy minus chance",
           "a probe carried to another dataset must beat a coin by 5 points, the resolution "
           "of every other comparison of methods here"),
    Family("unsupervised transfer costs nothing", "unchanged", 0.05, "pairwise accuracy",
           "Table 1's unsupervised cells equal each other along a row (to 0.01 F1); 5 points "
           "is the smallest gap between two judges worth reporting"),
    Family("layer profile: plateau", "unchanged", 0.05, "pairwise accuracy",
           "a layer within 5 points of the deeper layers' mean is on the plateau: the same "
           "resolution as the comparisons of methods"),
    Family("layer profile: jump", "beats", 0.1, "pairwise accuracy",
           "a rise under 0.1 (a third of the published ~0.3, from ~0.5 to ~0.8) is no jump"),
    Family("ablation leaves the judgement unchanged", "unchanged", 0.05, "ΔF1 (macro)",
           "the ablation's own equivalence margin (±0.05 of ΔF1, ±0.2 log-odds)"),
    Family("interventions change the judgement", "changes", 0.05, "Δaccuracy",
           "changes smaller than the ablation's margin are no change; fails only by "
           "equivalence"),
    Family("directions agree", "changes", None, "mean absolute cosine",
           "decided against its two null distributions, not a margin; it cannot fail "
           "without an interval on the mean absolute cosine (none is computed)"),
)}


#: Thesis Table 4.2 sorts each article's 16 summaries and takes Spearman against the humans.
#: A Spearman over a few summaries is another statistic (over 3 it is only ±0.5 or ±1, and
#: a sort of 3 is nearly the pairwise accuracy of Table 4.1), so a claim on it is tested only
#: where every article sorts at least this many: all of NEWSROOM's, under half of SummEval's.
MIN_SORTED_ITEMS: int = 7


@dataclass(frozen=True)
class Claim:
    """One published claim (module doc). ``read`` names its reader in :data:`READERS`,
    ``args`` what that reader is given."""

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

    @property
    def delta(self) -> float | None:
        return FAMILIES[self.family].delta
