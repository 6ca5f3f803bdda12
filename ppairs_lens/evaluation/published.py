"""The numbers the thesis, the paper and the ClimateX paper published, as typed records.

Transcribed from ``../shared/notes/seed-experiments.md`` (every cell that holds a number). A
table of ours prints these beside our numbers, always with the model they came from
(:func:`citation`): the papers ran 7B-70B models, so the comparison is of shape, not of level.

Documents (``source``): ``"thesis"`` (Maiya, Cambridge 2024: PPAIRS), ``"paper"`` (Maiya, Liu,
Debnath, Korhonen: probes as LLM judges), ``"climatex"`` (Lacombe, Wu, Dilworth: the ClimateX
data and its GPT baselines). Figure claims with no exact number carry their words in
``note``; their ``value`` is the number the claim names (e.g. ~0.8 F1), or NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

__all__ = ["Published", "PUBLISHED", "published", "citation", "DATASETS", "ASPECTS", "SEVERAL"]

#: Dataset names used in every record (and expected of callers matching on ``dataset``).
DATASETS = ("SummEval", "NEWSROOM", "HANNA", "ROCStories", "MCTACO", "CaTeRS", "MT-Bench",
            "LLMBar", "ClimateX")
#: The dataset (or model) of a claim made across several; its note says which.
SEVERAL = "several"
#: Thesis aspect columns CH, CON, FLU, RE.
ASPECTS = ("coherence", "consistency", "fluency", "relevance")


@dataclass(frozen=True)
class Published:
    """One published number: what was measured, on which model and data, and where it is."""

    source: str                       # "thesis" | "paper" | "climatex"
    table: str                        # "Table 4.1", "Table 1", "Figure 1", ...
    model: str
    dataset: str                      # one of DATASETS, or SEVERAL (a claim across datasets)
    method: str                       # "direct", "PAIRS", "PPAIRS", "supervised", ...
    metric: str                       # "pairwise accuracy", "spearman", "F1", ...
    value: float
    aspect: str | None = None         # thesis tables: coherence / consistency / fluency / relevance
    train_dataset: str | None = None  # paper Table 1: trained on (column); dataset = evaluated on
    setting: str | None = None        # "AR6", "WGI", "overall", ...
    note: str | None = None

    def __post_init__(self):
        if math.isnan(self.value) and not self.note:
            raise ValueError(f"{citation(self)}: a record without a number needs a note")
        if self.dataset not in DATASETS and not (self.dataset == SEVERAL and self.note):
            raise ValueError(f"{citation(self)}: unknown dataset {self.dataset!r}")


_MISTRAL, _LLAMA2, _LLAMA3 = "Mistral-7B-Instruct-v0.1", "Llama-2-7B-chat", "Llama-3-8B-Instruct"
_GPT4T = "GPT-4-Turbo (preview)"

# Thesis Tables 4.1 / 4.2: (model, method) -> NEWSROOM CH CON FLU RE, then SummEval CH CON FLU RE.
_TABLE_4_1 = {
    (_MISTRAL, "direct"): (0.57, 0.55, 0.58, 0.56, 0.56, 0.84, 0.77, 0.58),
    (_MISTRAL, "PAIRS"): (0.52, 0.44, 0.51, 0.53, 0.58, 0.55, 0.58, 0.59),
    (_MISTRAL, "PPAIRS"): (0.81, 0.81, 0.79, 0.79, 0.83, 0.92, 0.86, 0.81),
    (_LLAMA2, "direct"): (0.57, 0.57, 0.55, 0.57, 0.55, 0.84, 0.78, 0.58),
    (_LLAMA2, "PAIRS"): (0.64, 0.63, 0.65, 0.68, 0.58, 0.67, 0.60, 0.59),
    (_LLAMA2, "PPAIRS"): (0.80, 0.82, 0.79, 0.80, 0.86, 0.92, 0.87, 0.82),
    (_LLAMA3, "direct"): (0.66, 0.70, 0.64, 0.69, 0.68, 0.77, 0.69, 0.64),
    (_LLAMA3, "PAIRS"): (0.71, 0.72, 0.72, 0.71, 0.63, 0.59, 0.56, 0.63),
    (_LLAMA3, "PPAIRS"): (0.79, 0.81, 0.79, 0.79, 0.85, 0.91, 0.86, 0.82),
}
_TABLE_4_2 = {
    (_MISTRAL, "direct"): (0.32, 0.20, 0.26, 0.39, 0.23, 0.37, 0.19, 0.19),
    (_MISTRAL, "PAIRS"): (0.55, 0.48, 0.48, 0.53, 0.28, 0.30, 0.24, 0.27),
    (_MISTRAL, "PPAIRS"): (0.59, 0.59, 0.61, 0.55, 0.74, 0.39, 0.45, 0.68),
    (_LLAMA2, "direct"): (0.02, -0.02, 0.01, 0.14, 0.12, 0.18, 0.06, 0.11),
    (_LLAMA2, "PAIRS"): (0.43, 0.37, 0.28, 0.43, 0.17, 0.31, 0.18, 0.24),
    (_LLAMA2, "PPAIRS"): (0.57, 0.60, 0.57, 0.52, 0.72, 0.36, 0.44, 0.64),
    (_LLAMA3, "direct"): (0.21, 0.25, 0.07, 0.25, 0.35, 0.19, 0.14, 0.19),
    (_LLAMA3, "PAIRS"): (0.43, 0.44, 0.38, 0.30, 0.25, 0.26, 0.14, 0.29),
    (_LLAMA3, "PPAIRS"): (0.59, 0.68, 0.57, 0.56, 0.67, 0.38, 0.45, 0.64),
    (_GPT4T, "direct"): (0.55, 0.57, 0.60, 0.54, 0.44, 0.46, 0.42, 0.53),
    (_GPT4T, "PAIRS"): (0.64, 0.67, 0.60, 0.61, 0.53, 0.47, 0.48, 0.59),
}
# The thesis took these Spearman rows from the PAIRS paper.
_FROM_PAIRS = {(m, k) for m in (_MISTRAL, _LLAMA2, _GPT4T) for k in ("direct", "PAIRS")}


def _thesis_tables() -> list[Published]:
    return [Published("thesis", table, model, ("NEWSROOM", "SummEval")[k // 4], method, metric,
                      v, aspect=ASPECTS[k % 4],
                      note=("taken by the thesis from the PAIRS paper"
                            if table == "Table 4.2" and (model, method) in _FROM_PAIRS else None))
            for table, metric, rows in (("Table 4.1", "pairwise accuracy", _TABLE_4_1),
                                        ("Table 4.2", "spearman", _TABLE_4_2))
            for (model, method), values in rows.items() for k, v in enumerate(values)]


def _thesis_climatex() -> list[Published]:
    """Experiment 3 (Table 4.4): PPAIRS_INSERT tags by assessment cycle, and the probe."""
    insert = "binary-search insertion over low < medium < high < very high; reference pool 100"
    out = [Published("thesis", "Table 4.4", _LLAMA3, "ClimateX", "PPAIRS_INSERT", "accuracy", v,
                     setting=s, note=insert)
           for s, v in (("AR3", 0.69), ("AR4", 0.67), ("AR5", 0.64), ("AR6", 0.60),
                        ("overall", 0.64))]
    out.append(Published("thesis", "Table 4.4", _LLAMA3, "ClimateX", "PPAIRS",
                         "pairwise accuracy", 0.727,
                         note="Experiment 3: the probe under PPAIRS_INSERT, trained on 100 "
                              "labelled statements (balanced); which statement is expressed "
                              "with higher confidence"))
    return out


# ClimateX paper, its 300-statement test split: (model, method) -> accuracy, macro F1, slope, bias.
_CLIMATEX = {
    ("GPT-3.5-turbo", "zero-shot"): (0.434, 0.321, 0.215, -0.046),
    ("GPT-3.5-turbo", "few-shot"): (0.417, 0.331, 0.233, -0.054),
    ("GPT-4", "zero-shot"): (0.443, 0.324, 0.223, +0.042),
    ("GPT-4", "few-shot"): (0.470, 0.376, 0.323, +0.083),
    ("Cohere Command-XL", "zero-shot"): (0.310, 0.194, 0.069, +0.708),
    ("Cohere Command-XL", "few-shot"): (0.320, 0.270, 0.257, +0.683),
}
_CLIMATEX_SPLIT = "test split of 300 statements (50 low, 100 medium, 100 high, 50 very high)"
#: Where the ClimateX paper gives each number: accuracy and macro F1 in Appendix D's Table 4,
#: slope and bias in Table 1, the non-expert humans in Appendix E.4's Table 5.
_CLIMATEX_TABLES = {"accuracy": "Table 4", "macro F1": "Table 4", "slope": "Table 1",
                    "bias": "Table 1"}
#: Statements each model answered with a level (Table 4's support; the rest went unparsed):
#: its accuracy and F1 are over these.
_CLIMATEX_SUPPORT = {("GPT-3.5-turbo", "zero-shot"): 295, ("GPT-3.5-turbo", "few-shot"): 295,
                     ("Cohere Command-XL", "few-shot"): 297}


def _climatex() -> list[Published]:
    out = []
    for (model, method), values in _CLIMATEX.items():
        note = _CLIMATEX_SPLIT + ("; 4 demonstrations, one per level"
                                  if method == "few-shot" else "")
        if (model, method) in _CLIMATEX_SUPPORT:
            note += (f"; accuracy and F1 over the {_CLIMATEX_SUPPORT[model, method]} statements "
                     "it answered with a level")
        for metric, v in zip(("accuracy", "macro F1", "slope", "bias"), values):
            out.append(Published("climatex", _CLIMATEX_TABLES[metric], model, "ClimateX",
                                 method, metric, v, setting="overall", note=note))
    out.append(Published("climatex", "Table 5", "three non-expert humans", "ClimateX",
                         "human", "accuracy", 0.362, setting="overall", note=_CLIMATEX_SPLIT))
    slope = ("slope: change of the mean predicted level (0-3) per true level (1 perfect, "
             "0 random); working group subset of the test split")
    out += [Published("climatex", "Table 1", "GPT-4", "ClimateX", "few-shot", "slope", v,
                      setting=s, note=slope) for s, v in (("WGI", 0.445), ("WGII/III", 0.297))]
    return out


# Paper Table 1 (Llama 3.1 70B, F1): evaluated on (row) -> {trained on (column): (sup, unsup)}.
_TABLE_1 = {
    "NEWSROOM": {"SummEval": (0.63, 0.77), "HANNA": (0.65, 0.77), "ROCStories": (0.78, 0.77),
                 "MCTACO": (0.78, 0.77), "CaTeRS": (0.64, 0.77)},
    "SummEval": {"NEWSROOM": (0.66, 0.76), "HANNA": (0.63, 0.76), "ROCStories": (0.77, 0.76),
                 "MCTACO": (0.77, 0.76), "CaTeRS": (0.58, 0.76)},
    "HANNA": {"NEWSROOM": (0.67, 0.71), "SummEval": (0.62, 0.71), "ROCStories": (0.71, 0.71),
              "MCTACO": (0.71, 0.71), "CaTeRS": (0.59, 0.70)},
    "ROCStories": {"NEWSROOM": (0.87, 0.99), "SummEval": (0.78, 0.99), "HANNA": (0.79, 0.98),
                   "MCTACO": (0.99, 0.99), "CaTeRS": (0.71, 0.99)},
    "MCTACO": {"NEWSROOM": (0.79, 0.95), "SummEval": (0.67, 0.95), "HANNA": (0.70, 0.95),
               "ROCStories": (0.96, 0.95), "CaTeRS": (0.74, 0.95)},
    "CaTeRS": {"NEWSROOM": (0.75, 0.78), "SummEval": (0.62, 0.78), "HANNA": (0.67, 0.78),
               "ROCStories": (0.76, 0.78), "MCTACO": (0.77, 0.78)},
}
_LLAMA31_70B = "Llama 3.1 70B"
# Paper Table 2: change in the judge's F1 on MT-Bench with the probe direction removed.
_TABLE_2 = {"Gemma 2 2B": (-0.00, -0.01), "Gemma 2 9B": (0.01, 0.01), "Gemma 2 27B": (0.00, 0.00),
            "Llama 3.1 8B": (0.00, 0.01), _LLAMA31_70B: (0.03, 0.03)}


def _paper_tables() -> list[Published]:
    methods = ("supervised", "unsupervised")
    ablation = ("the last token's state orthogonalised against the probe direction after "
                "every block and after the final norm while the model judges")
    return ([Published("paper", "Table 1", _LLAMA31_70B, evaluated, method, "F1", v,
                       train_dataset=trained)
             for evaluated, row in _TABLE_1.items() for trained, pair in row.items()
             for method, v in zip(methods, pair)]
            + [Published("paper", "Table 2", model, "MT-Bench", method, "delta F1", v,
                         note=ablation)
               for model, pair in _TABLE_2.items() for method, v in zip(methods, pair)])


_NAN = float("nan")


def _paper_claims() -> list[Published]:
    """Claims read off figures and the text: approximate numbers, with their words."""
    P = Published
    return [
        P("paper", "Section datasets", "human annotators", "MT-Bench", "human", "agreement",
          0.80, note="humans agree on 80% of MT-Bench comparisons (labels: majority vote)"),
        *(P("paper", "Figure 1", SEVERAL, "MT-Bench", m, "F1", 0.8,
            note=f"approximate: {m} probe ~0.8 F1, above prompting, at the same cost "
                 "(two forward passes per example)") for m in ("supervised", "unsupervised")),
        P("paper", "Figure 2", SEVERAL, SEVERAL, "unsupervised", "claim", _NAN,
          note="unsupervised probes beat position-calibrated zero-shot prompting on all six "
               "datasets (the paper's) and four model families except Qwen 2.5 0.5B; direct "
               "scoring and G-Eval also reported on the text-quality sets"),
        P("paper", "Figure 3", "Gemma 2 2B/9B/27B", SEVERAL, "supervised", "claim", _NAN,
          note="supervised probes beat unsupervised ones and LoRA (rank 64, alpha 64, all "
               "modules, one epoch) and full finetuning on the same 5000 examples; finetuning "
               "is closer on common sense than on text quality"),
        P("paper", "Figure 4", SEVERAL, "LLMBar", "probe", "claim", _NAN,
          note="probes trained on LLMBar Natural + Normal lose less than prompting on every "
               "other subset but one (notably Constraint); same on Gemma 2 2B/9B/27B and "
               "Llama 3.1 8B", setting="Natural + Normal -> other subsets"),
        P("paper", "Figure 5", SEVERAL, SEVERAL, "unsupervised", "|cosine|", 0.7,
          note="unsupervised directions agree up to sign across the Table 1 datasets: most "
               "|cos| > 0.7"),
        P("paper", "Figure 5", SEVERAL, SEVERAL, "supervised", "cosine", 0.0,
          note="supervised directions' cosines across the Table 1 datasets centre on 0"),
        P("paper", "Appendix A", SEVERAL, SEVERAL, "supervised", "plateau depth", 0.5,
          note="supervised probes rise smoothly over layers and plateau by 40-50% of depth "
               "(value: the upper end)"),
        P("paper", "Appendix A", SEVERAL, SEVERAL, "unsupervised", "F1", 0.8,
          note="unsupervised probes jump from ~0.5 to ~0.8 F1 at a model-dependent layer, "
               "earlier in larger models"),
    ]


PUBLISHED: tuple[Published, ...] = tuple(
    _thesis_tables() + _thesis_climatex() + _climatex() + _paper_tables() + _paper_claims())

_FIELDS = frozenset(f.name for f in fields(Published))


def published(**match) -> list[Published]:
    """The records whose fields equal every ``field=value`` given (all records when none)."""
    unknown = set(match) - _FIELDS
    if unknown:
        raise TypeError(f"published() has no field(s) {sorted(unknown)}; fields: "
                        f"{sorted(_FIELDS)}")
    return [p for p in PUBLISHED if all(getattr(p, k) == v for k, v in match.items())]


def citation(p: Published) -> str:
    """Where a number comes from, e.g. ``"thesis Table 4.1 (Mistral-7B-Instruct-v0.1)"``."""
    return f"{p.source} {p.table} ({p.model})"
