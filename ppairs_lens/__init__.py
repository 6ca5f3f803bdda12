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

#: Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    # models
    "load_model": "ppairs_lens.models.loading",
    "ModelSpec": "ppairs_lens.models.spec",
    "load_tokenizer": "ppairs_lens.models.tokenizer",
    "model_name": "ppairs_lens.models.loading",
    "tiny_model": "ppairs_lens.models.tiny",
    "hook_points": "ppairs_lens.models.hook_points",
    # data
    "Comparison": "ppairs_lens.data.records",
    "Statement": "ppairs_lens.data.records",
    "ScoredItem": "ppairs_lens.data.records",
    "Dataset": "ppairs_lens.data.records",
    "builtin_dataset": "ppairs_lens.data.builtin",
    "load_dataset": "ppairs_lens.data.formats",
    "load_dataset_spec": "ppairs_lens.data.specs",
    # activations
    "ComparisonTemplate": "ppairs_lens.activations.prompts",
    "StatementTemplate": "ppairs_lens.activations.prompts",
    "build_contrast_pairs": "ppairs_lens.activations.prompts",
    "HarvestSettings": "ppairs_lens.activations.runner",
    "harvest_pairs": "ppairs_lens.activations.harvest",
    "harvest_texts": "ppairs_lens.activations.texts",
    "text_pairs": "ppairs_lens.activations.texts",
    "ActivationStore": "ppairs_lens.activations.store",
    "StoreMeta": "ppairs_lens.activations.store_meta",
    "PairInfo": "ppairs_lens.activations.pair_info",
    "harvest_dataset": "ppairs_lens.activations.pipeline",
    "ensure_store": "ppairs_lens.activations.pipeline",
    # probes
    "SupervisedProbe": "ppairs_lens.probes.estimators",
    "PCAProbe": "ppairs_lens.probes.estimators",
    "MassMeanProbe": "ppairs_lens.probes.estimators",
    "make_probe": "ppairs_lens.probes.estimators",
    "PROBE_KINDS": "ppairs_lens.probes.estimators",
    "fit_sweep": "ppairs_lens.probes.sweep",
    "SweepProbes": "ppairs_lens.probes.sweep",
    # evaluation
    "train_test_split_pairs": "ppairs_lens.evaluation.splits",
    "split_store": "ppairs_lens.evaluation.store_split",
    "evaluate": "ppairs_lens.evaluation.metrics",
    "spearman": "ppairs_lens.evaluation.metrics",
    # judges
    "zero_shot": "ppairs_lens.judges.zero_shot",
    "evaluate_zero_shot": "ppairs_lens.judges.zero_shot",
    "few_shot": "ppairs_lens.judges.few_shot",
    "evaluate_few_shot": "ppairs_lens.judges.few_shot",
    "judge_diagnostics": "ppairs_lens.judges.calibration",
    "judge_held_out": "ppairs_lens.judges.held_out",
    "paired_difference": "ppairs_lens.evaluation.paired",
    "validation_split": "ppairs_lens.evaluation.store_split",
    "ProbeComparator": "ppairs_lens.judges.comparators",
    "ZeroShotComparator": "ppairs_lens.judges.comparators",
    # interventions
    "ablate": "ppairs_lens.interventions.ablation",
    "ablation_hooks": "ppairs_lens.interventions.ablation",
    "reject": "ppairs_lens.interventions.ablation",
    "steer": "ppairs_lens.interventions.steering",
    "steering_hooks": "ppairs_lens.interventions.steering",
    "judge_under_steering": "ppairs_lens.interventions.steered_judge",
    # saving and loading
    "ProbeMetadata": "ppairs_lens.probes.persistence",
    "save_probe": "ppairs_lens.probes.persistence",
    "load_probe": "ppairs_lens.probes.persistence",
    "save_sweep": "ppairs_lens.probes.persistence",
    "load_sweep": "ppairs_lens.probes.persistence",
    "save_direction": "ppairs_lens.probes.persistence",
    "load_direction": "ppairs_lens.probes.persistence",
    "metadata_from_store": "ppairs_lens.probes.persistence",
    "save_store_probes": "ppairs_lens.evaluation.saved_probes",
    "push_to_hub": "ppairs_lens.probes.hub_push",
    "read_model_card": "ppairs_lens.probes.model_card",
    "CCSProbe": "ppairs_lens.probes.estimators",
    "ALL_PROBE_KINDS": "ppairs_lens.probes.estimators",
    "fit_leace": "ppairs_lens.interventions.leace",
    "erase": "ppairs_lens.interventions.leace",
    "leace_hooks": "ppairs_lens.interventions.leace",
    "permuted_erasers": "ppairs_lens.interventions.leace_null",
    "judge_under_erasers": "ppairs_lens.interventions.leace_null",
    "eraser_null_test": "ppairs_lens.interventions.leace_null",
    "leace_null_study": "ppairs_lens.interventions.leace_null",
    "harvest_labelled_texts": "ppairs_lens.activations.texts",
    "LabelledTexts": "ppairs_lens.activations.texts",
    "sae_attribution": "ppairs_lens.probes.sae_features",
    "SAEAttribution": "ppairs_lens.probes.sae_features",
    # ranking
    "merge_sort": "ppairs_lens.ranking.merge_sort",
    "beam_merge_sort": "ppairs_lens.ranking.merge_sort",
    "insertion_score": "ppairs_lens.ranking.insertion",
}

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
