"""ppairs-lens: PPairS (pairwise preference search with linear probing) on TransformerLens.

``import ppairs_lens as pl`` gives the public API in one namespace::

    model = pl.load_model()                                   # embedded SmolLM2
    store = pl.ensure_store(model, pl.builtin_dataset("larger_number"), "stores")
    probes = pl.fit_sweep(store.load(), store.labels())       # every kind, every layer

Each name lives in the subpackage that does its job (see docs/architecture.md) and is
imported on first use, so ``import ppairs_lens`` stays cheap and loads no torch model code
until a name that needs it is touched.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: The module that defines each public name (``ppairs_lens.<module>``).
_MODULES: dict[str, tuple[str, ...]] = {
    "models.loading": ("load_model", "model_name"),
    "models.spec": ("ModelSpec",),
    "models.tokenizer": ("load_tokenizer",),
    "models.tiny": ("tiny_model",),
    "models.hook_points": ("hook_points",),
    "data.records": ("Comparison", "Statement", "ScoredItem", "Dataset"),
    "data.builtin": ("builtin_dataset",),
    "data.formats": ("load_dataset",),
    "data.specs": ("load_dataset_spec",),
    "activations.prompts": ("ComparisonTemplate", "StatementTemplate", "build_contrast_pairs"),
    "activations.runner": ("HarvestSettings",),
    "activations.harvest": ("harvest_pairs",),
    "activations.texts": ("harvest_texts", "text_pairs", "harvest_labelled_texts",
                          "LabelledTexts"),
    "activations.store": ("ActivationStore",),
    "activations.store_meta": ("StoreMeta",),
    "activations.pair_info": ("PairInfo",),
    "activations.pipeline": ("harvest_dataset", "ensure_store"),
    "probes.estimators": ("SupervisedProbe", "PCAProbe", "MassMeanProbe", "make_probe",
                          "PROBE_KINDS", "CCSProbe", "ALL_PROBE_KINDS"),
    "probes.sweep": ("fit_sweep", "SweepProbes"),
    "evaluation.splits": ("train_test_split_pairs",),
    "evaluation.store_split": ("split_store", "validation_split"),
    "evaluation.metrics": ("evaluate", "spearman"),
    "judges.zero_shot": ("zero_shot", "evaluate_zero_shot"),
    "judges.few_shot": ("few_shot", "evaluate_few_shot"),
    "judges.calibration": ("judge_diagnostics",),
    "judges.held_out": ("judge_held_out",),
    "evaluation.paired": ("paired_difference",),
    "judges.comparators": ("ProbeComparator", "ZeroShotComparator"),
    "interventions.ablation": ("ablate", "ablation_hooks", "reject"),
    "interventions.steering": ("steer", "steering_hooks", "judge_under_steering"),
    "probes.persistence": ("ProbeMetadata", "save_probe", "load_probe", "save_sweep",
                           "load_sweep", "save_direction", "load_direction",
                           "metadata_from_store", "push_to_hub"),
    "evaluation.saved_probes": ("save_store_probes",),
    "probes.hub": ("read_model_card",),
    "interventions.leace": ("fit_leace", "erase", "leace_hooks", "permuted_erasers",
                            "judge_under_erasers", "eraser_null_test", "leace_null_study"),
    "probes.sae_features": ("sae_attribution", "SAEAttribution"),
    "ranking.merge_sort": ("merge_sort", "beam_merge_sort"),
    "ranking.insertion": ("insertion_score",),
}
_EXPORTS: dict[str, str] = {name: f"ppairs_lens.{module}" for module, names in _MODULES.items()
                            for name in names}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ppairs_lens' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
