"""The main job's table steps, run in order after the layer sweep, each through the step cache
(remembered under the run's config, the model and the stores' fingerprints, plus what
:attr:`TableStep.key` adds). A step added to the main job is one :class:`TableStep` (its work
a function ``def run(ctx) -> Record`` declaring the record it hands on) appended to
:data:`TABLE_STEPS`; ``docs/architecture.md`` shows one, and ``tests/test_table_steps.py`` runs
it on the tiny model.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analyses.ablation import AblationRows, run_ablation
from analyses.controls import ControlRows, run_controls
from analyses.cross_dataset import TransferHeadline, run_transfer
from analyses.distribution_shift import ShiftResult, run_shift
from analyses.finetuning import FinetuningRows, run_finetuning
from analyses.insertion import InsertionRows, run_insertion
from analyses.probes_vs_prompting import PvPRows, run_probes_vs_prompting
from analyses.replication.config import ReplicationConfig
from analyses.layer_sweep import SweepResult
from analyses.replication.sets import comparison_names, shifted_names, summeval_names
from analyses.steering import SteeringRows, run_steering
from analyses.thesis_tables import ThesisRows, run_thesis_tables
from ppairs_lens.activations.pipeline import ensure_store
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data import builtin_dataset
from ppairs_lens.data.records import Dataset
from ppairs_lens.io.study_runner import Units, declared_result
from ppairs_lens.judges.held_out import HeldOutScores, held_out_datasets
from ppairs_lens.judges.study import HeldOutJudges

__all__ = ["StepContext", "TABLE_STEPS", "TableStep", "sections"]


@dataclass(frozen=True)
class StepContext:
    """What the table steps read: ``stores`` those that fit the split, by dataset name;
    ``ratings`` the direct / G-Eval ratings; ``configs`` each step's config by step name
    (:func:`analyses.replication.run.step_configs`)."""

    bridge: Any  # the model: a TransformerBridge or a HookedTransformer
    cfg: ReplicationConfig
    out: Path
    log: Callable[[str], None]
    datasets: Mapping[str, Dataset]
    stores: Mapping[str, ActivationStore]
    judges: Mapping[str, HeldOutJudges]
    ratings: Mapping[str, HeldOutScores]
    sweep: SweepResult
    configs: Mapping[str, Any]

    @property
    def names(self) -> list[str]:
        """The kept datasets, in the run's order."""
        return list(self.stores)

    def held_out(self, name: str) -> Dataset:
        return held_out_datasets(self.stores[name], self.datasets[name],
                                 **self.cfg.settings.split_kwargs())[1]


@dataclass(frozen=True)
class TableStep:
    """One step after the sweep. ``run(ctx)`` writes its files into ``ctx.out`` and returns
    its record (declared by its return annotation: the step cache rebuilds that type);
    ``section``: its key in ``summary.json`` (None: nothing the summary keeps); ``outputs``:
    files whose absence makes a remembered step run again; ``key``: further inputs it is
    remembered under; ``on_stores``: whether the run's stores are among them; ``units``: what
    it counts, for its rate."""

    name: str
    section: str | None
    run: Callable[[StepContext], Any]
    outputs: tuple[str, ...] = ()
    key: Callable[[StepContext], dict] = field(default=lambda ctx: {})
    on_stores: bool = True
    units: Callable[[StepContext], Units] = field(default=lambda ctx: None)


def sections(steps: tuple[TableStep, ...]) -> dict[str, type]:
    """Each step's ``summary.json`` section and the record it is read back as (a step that
    may have nothing to do declares ``Record | None``)."""
    out = {}
    for s in steps:
        if s.section:
            t = declared_result(s.run)
            out[s.section] = next((a for a in typing.get_args(t) if a is not type(None)), t)
    return out


def _probes_vs_prompting(ctx: StepContext) -> PvPRows:
    return run_probes_vs_prompting(
        ctx.sweep, {n: ctx.judges[n].record() for n in ctx.names}, ctx.out,
        ctx.configs["probes vs prompting"])


def _thesis_tables(ctx: StepContext) -> ThesisRows:
    names = summeval_names(ctx.names)
    if not names:
        return ThesisRows()
    chosen = ctx.sweep.chosen()
    return run_thesis_tables(
        [(ctx.stores[n], ctx.held_out(n)) for n in names],
        {n: ctx.judges[n].zero_shot_p() for n in names}, ctx.ratings,
        {n: chosen[(n, "supervised")] for n in names}, ctx.out, ctx.configs["thesis tables"])


def _transfer(ctx: StepContext) -> TransferHeadline:
    names = comparison_names(ctx.names, {n: ctx.datasets[n].kind for n in ctx.names})
    # F1 for the report's Table 1; accuracy with its group differences for Table 1's claims
    return run_transfer([ctx.stores[n] for n in names], ctx.out,
                        ctx.configs["transfer"]).headline()


def _shift(ctx: StepContext) -> ShiftResult | None:
    if "llmbar-clean" not in ctx.stores:
        return None
    return run_shift(ctx.stores["llmbar-clean"],
                     [ctx.stores[n] for n in shifted_names(ctx.names)],
                     {n: ctx.judges[n].zero_shot_p() for n in ctx.names}, ctx.out,
                     ctx.configs["distribution shift"])


def _tuned_z(ctx: StepContext) -> dict:
    """The zero-shot judge's answers on each finetuning set (the judges step's, reused)."""
    return {n: ctx.judges[n].zero_shot_z() for n in ctx.cfg.finetune_datasets
            if n in ctx.stores}


def _finetuning(ctx: StepContext) -> FinetuningRows:
    tuned = _tuned_z(ctx)
    if not tuned:
        return FinetuningRows()
    return run_finetuning(ctx.bridge, [(ctx.stores[n], ctx.datasets[n]) for n in tuned],
                          ctx.out, ctx.configs["finetuning"], zero_shot_z=tuned)


def _ablated(ctx: StepContext) -> list:
    """The ablation's and the steering's (store, dataset), where the run has it."""
    n = ctx.cfg.ablation_dataset
    return [(ctx.stores[n], ctx.datasets[n])] if n in ctx.stores else []


def _ablation(ctx: StepContext) -> AblationRows:
    items = _ablated(ctx)
    return (run_ablation(ctx.bridge, items, ctx.out, ctx.configs["ablation"], log=ctx.log)
            if items else AblationRows())


def _steering(ctx: StepContext) -> SteeringRows:
    items = _ablated(ctx)
    return (run_steering(ctx.bridge, items, ctx.out, ctx.configs["steering"], log=ctx.log)
            if items else SteeringRows())


def _insertion(ctx: StepContext) -> InsertionRows:
    climatex = Path(ctx.cfg.shared_data) / "climatex" / "ipcc_statements_dataset.tsv"
    if ctx.cfg.datasets is not None or not climatex.is_file():
        return InsertionRows()
    return run_insertion(ctx.bridge, ctx.configs["insertion"], ctx.out)


def _controls(ctx: StepContext) -> ControlRows:    # known answers: a built-in the model solves
    c = ctx.configs["controls"]
    store = ensure_store(ctx.bridge, builtin_dataset(c.dataset, seed=ctx.cfg.settings.seed,
                                                     n=c.n_pairs), ctx.cfg.stores)
    return run_controls(store, c, ctx.out)


def _ablation_units(ctx: StepContext) -> Units:
    a = ctx.cfg.ablation
    return (a.n_random + a.n_matched) * a.max_eval_pairs, "nulls x pairs"


#: The main job's steps after the sweep, in order (``summary.json``'s sections too).
TABLE_STEPS: tuple[TableStep, ...] = (
    TableStep("probes vs prompting", "probes_vs_prompting", _probes_vs_prompting,
              ("probes_vs_prompting.csv",), key=lambda ctx: {"sweep": ctx.sweep}),
    TableStep("thesis tables", "thesis_tables", _thesis_tables, ("thesis_tables.csv",),
              key=lambda ctx: {"sweep": ctx.sweep}),
    TableStep("transfer", "transfer", _transfer, ("transfer.csv", "transfer.png")),
    TableStep("distribution shift", "shift", _shift, ("distribution_shift.csv",)),
    TableStep("finetuning", "finetuning", _finetuning, ("finetuning.csv",),
              key=lambda ctx: {"judges": _tuned_z(ctx)}),
    TableStep("ablation", "ablation", _ablation, ("ablation.csv",), units=_ablation_units),
    TableStep("steering", "steering", _steering, ("steering.csv",)),
    TableStep("insertion", "insertion", _insertion, ("insertion.csv",)),
    # the controls harvest their own built-in: remembered under the config and model alone
    TableStep("controls", "controls", _controls, ("controls.csv",), on_stores=False),
)
