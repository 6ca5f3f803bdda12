"""How long a run's model passes will take, said before they start.

A step's cost is the token positions the prefix-sharing plan computes for the very prompts it
builds, times a time per token *measured* on this machine and model (a few of the kind's own
prompts, after one untimed warm-up pass; the cost of timing is said). Steps whose results are
on disk cost nothing; fitting probes and no-model baselines are not in the estimate. A judge
under an intervention is timed on its own prompts, branches and hooks. A pass that cannot be
timed so (a finetuning step, a sort whose comparisons depend on the answers) is planned with
its count and named as left out (:meth:`PlannedStep.untimed`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from ppairs_lens.activations.harvest import harvest_pairs
from ppairs_lens.activations.pair_info import pair_info
from ppairs_lens.activations.pipeline import finished_store, pending_records, store_template
from ppairs_lens.activations.prefix_sharing import plan, tokens_computed
from ppairs_lens.activations.prompts import ContrastPair, build_contrast_pairs, default_template
from ppairs_lens.activations.runner import model_device
from ppairs_lens.data.records import TIE, Dataset
from ppairs_lens.errors import DataError
from ppairs_lens.evaluation.store_split import split_records
from ppairs_lens.judges.held_out import (
    form_prompts,
    judge_cache,
    judge_cache_dir,
    judge_cache_key,
)
from ppairs_lens.io.json_fields import read_json_object
from ppairs_lens.io.outputs import write_json
from ppairs_lens.judges.zero_shot import choice_logodds_of
from ppairs_lens.models.loading import model_name

__all__ = ["PlannedStep", "RunEstimate", "SAMPLE_PROMPTS", "announce", "estimate_run",
           "held_out_part", "plan_held_out_run", "planned_template", "planned_tokens",
           "rate_key", "remembered_rates"]

#: Prompts of each step kind run and timed to measure its time per token.
SAMPLE_PROMPTS = 4


@dataclass(frozen=True)
class PlannedStep:
    """One model step of a run: ``kind`` "harvest", a judge form or a judge under an
    intervention (``branches`` per prompt, treated by the hooks ``final_hooks(model)``
    makes); ``count`` / ``unit``: the size of a pass that is not timed."""

    dataset: str
    kind: str
    prompts: tuple[ContrastPair, ...] = ()
    done: bool = False
    branches: int = 1
    final_hooks: Callable[[object], list] | None = None
    count: int | None = None
    unit: str = "prompts"

    @classmethod
    def untimed(cls, dataset: str, kind: str, count: int, unit: str) -> PlannedStep:
        """A model pass planned by its size only (no rate of its kind can be measured on a
        few of its prompts), left out of the estimate and named."""
        return cls(dataset, kind, count=count, unit=unit)

    @property
    def timed(self) -> bool:
        return self.count is None

    @property
    def tokens(self) -> int:
        return (planned_tokens(self.prompts, harvest=self.kind == "harvest",
                               branches=self.branches) if self.timed else 0)


def planned_tokens(prompts: Sequence[ContrastPair], *, harvest: bool = False,
                   branches: int = 1) -> int:
    """Token positions the runner computes for ``prompts``: a harvest reads two final tokens
    after the whole prefix, a judge ``branches`` after the prefix minus its last token."""
    if not prompts:
        return 0
    prefixes = [p.prefix_ids if harvest else p.prefix_ids[:-1] for p in prompts]
    return tokens_computed(plan(prefixes, [p.group for p in prompts]), 2 if harvest else branches)


def _run(bridge, step: PlannedStep, prompts: Sequence[ContrastPair], names) -> None:
    if step.kind == "harvest":
        harvest_pairs(bridge, prompts, names=names)
    else:
        choice_logodds_of(bridge, prompts, n_branch=step.branches,
                          final_hooks=step.final_hooks(bridge) if step.final_hooks else (),
                          desc=f"timing {step.kind}")


@dataclass(frozen=True)
class RunEstimate:
    """The planned steps and each kind's measured seconds per token."""

    steps: tuple[PlannedStep, ...]
    seconds_per_token: dict[str, float]
    timing_seconds: float = 0.0      # what measuring the rates cost
    remembered: tuple[str, ...] = ()    # kinds whose rate an earlier run measured
    unmeasured: tuple[str, ...] = ()    # kinds left unmeasured on request (no rate known)

    def step_seconds(self, step: PlannedStep) -> float:
        return 0.0 if step.done else step.tokens * self.seconds_per_token.get(step.kind, 0.0)

    @property
    def seconds(self) -> float:
        return sum(self.step_seconds(s) for s in self.steps)

    def lines(self) -> list[str]:
        out = []
        for s in self.steps:
            if not s.timed:
                out.append(f"  {s.dataset:32s} {s.kind:14s} {s.count:5d} {s.unit}  "
                           "not estimated")
                continue
            state = "on disk, reused" if s.done else f"~{self.step_seconds(s):.0f} s"
            reads = f" x {s.branches} read-outs" if s.branches > 1 else ""
            out.append(f"  {s.dataset:32s} {s.kind:14s} {len(s.prompts):5d} prompts{reads} "
                       f"{s.tokens:8d} tokens  {state}")
        rates = ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in self.seconds_per_token.items())
        measured = [k for k in self.seconds_per_token if k not in self.remembered]
        how = (f"{rates} per token; " if rates else "every model step on disk; ")
        if measured:
            how += (f"{', '.join(measured)} measured on {SAMPLE_PROMPTS} prompts in "
                    f"{self.timing_seconds:.0f} s (counted in the total); ")
        if self.remembered:
            how += f"{', '.join(self.remembered)} as an earlier run on this model measured; "
        if self.unmeasured:
            how += (f"{', '.join(self.unmeasured)} not measured (--no-calibration, no earlier "
                    "rate): left out; ")
        untimed = list(dict.fromkeys(s.kind for s in self.steps if not s.timed))
        if untimed:
            how += f"{', '.join(untimed)}: no rate of their kind: left out; "
        out.append(f"estimated model time: ~{self.seconds + self.timing_seconds:.0f} s ({how}"
                   "fitting probes and baselines not included)")
        return out

    def remaining(self, took: dict[tuple[str, str], float]) -> str:
        """The model time left after the steps in ``took`` (seconds), the others scaled by how
        far the finished ones were off (a shared machine's load moves a time measured on a
        few prompts)."""
        ran = [s for s in self.steps if (s.dataset, s.kind) in took and not s.done]
        est = sum(self.step_seconds(s) for s in ran)
        scale = sum(took[s.dataset, s.kind] for s in ran) / est if est > 0 else 1.0
        left = sum(self.step_seconds(s) for s in self.steps if (s.dataset, s.kind) not in took)
        return (f"model time left ~{scale * left:.0f} s (the finished steps took x{scale:.2f} "
                "their estimate)")

    def compared(self, took: dict[tuple[str, str], float]) -> list[str]:
        """Each step's measured time beside its estimate: how far to trust the next one."""
        out = ["model steps, measured vs estimated:"]
        for s in self.steps:
            if (s.dataset, s.kind) in took:
                est = "on disk" if s.done else f"~{self.step_seconds(s):.0f} s"
                out.append(f"  {s.dataset:32s} {s.kind:10s} {took[s.dataset, s.kind]:7.1f} s "
                           f"(estimated {est})")
        return out


#: Step kinds timed as another: a zero-shot prompt is a harvest's prompt (same tokens, the
#: same passes; the harvest reads a few more columns), so one timing serves both.
TIMED_AS = {"zero_shot": "harvest"}


def remembered_rates() -> Path:
    """The user cache's ``rates.json``, where commands remember measured rates (checked
    writable before any timing)."""
    from ppairs_lens.cache import writable_cache_root

    return writable_cache_root() / "rates.json"


def rate_key(bridge, kind: str) -> str:
    """What a measured time per token depends on: the model, its device, the step kind and
    the threads a CPU runs it on."""
    return (f"{model_name(bridge)} | {model_device(bridge)} | {kind} | "
            f"{torch.get_num_threads()} threads")


def _known_rates(path: Path | None) -> dict[str, float]:
    """The rates remembered in ``path`` (not a positive finite number: measured again)."""
    if path is None or not Path(path).is_file():
        return {}
    return {k: float(v) for k, v in read_json_object(path).items()
            if isinstance(v, (int, float)) and math.isfinite(v) and v > 0}


def estimate_run(bridge, steps: Sequence[PlannedStep], *, names=None,
                 sample: int = SAMPLE_PROMPTS, remembered: str | Path | None = None,
                 measure: bool = True) -> RunEstimate:
    """The run's estimate, each step kind's time per token measured on ``sample`` of its first
    pending step's prompts (a kind in :data:`TIMED_AS` takes the other's), with the seconds the
    timing itself took (``timing_seconds``). ``names``: the harvest's read-outs.
    ``remembered``: a JSON file of rates by :func:`rate_key`, reused and added to; ``measure``
    False: nothing is timed, a kind without a remembered rate is left out (and said to be)."""
    start = time.perf_counter()
    pending = [s for s in steps if not s.done and s.prompts and s.timed]
    known = _known_rates(remembered)
    rates: dict[str, float] = {}
    reused, unmeasured, learned = [], [], {}
    warmed = False
    for s in pending:
        if s.kind in rates or s.kind in unmeasured:
            continue
        if TIMED_AS.get(s.kind) in rates:
            rates[s.kind] = rates[TIMED_AS[s.kind]]
            if TIMED_AS[s.kind] in reused:   # not measured now either
                reused.append(s.kind)
            continue
        key = rate_key(bridge, s.kind)
        if key in known:
            rates[s.kind] = known[key]
            reused.append(s.kind)
            continue
        if not measure:
            unmeasured.append(s.kind)
            continue
        part = list(s.prompts[:sample])
        if not warmed:  # the first pass pays one-off costs (allocation, kernel choice)
            _run(bridge, s, part[:1], names)
            warmed = True
        t0 = time.perf_counter()
        _run(bridge, s, part, names)
        rates[s.kind] = (time.perf_counter() - t0) / max(
            planned_tokens(part, harvest=s.kind == "harvest", branches=s.branches), 1)
        learned[key] = rates[s.kind]
    if remembered is not None and learned:
        write_json(remembered, {**known, **learned})
    return RunEstimate(tuple(steps), rates, time.perf_counter() - start, tuple(reused),
                       tuple(unmeasured))


def announce(bridge, steps: Sequence[PlannedStep], *, names=None, measure: bool = True,
             log=None) -> RunEstimate:
    """:func:`estimate_run` with the remembered rates, its plan printed (``log``, default
    stdout, flushed: the work follows at once); ``measure`` False: ``--no-calibration``."""
    estimate = estimate_run(bridge, steps, names=names, remembered=remembered_rates(),
                            measure=measure)
    text = "\n".join(["plan:", *estimate.lines()])
    if log is None:
        print(text, flush=True)
    else:
        log(text)
    return estimate


def planned_template(bridge, dataset: Dataset, root, *, template=None, names=None):
    """``(finished store or None, template)``: the template ``dataset``'s store was (or will
    be) harvested with: a finished store's own, else ``template`` or the dataset's default."""
    _, store = finished_store(bridge, dataset, root, template=template, names=names)
    return store, (store_template(store) if store is not None else
                   (template or default_template(dataset)))


def held_out_part(bridge, dataset: Dataset, root, *, template=None, split: dict,
                  max_pairs: int | None, seed: int) -> tuple:
    """``(template, test records)``: the held-out records an intervention study's judge will
    answer, from the split of the records' own pair information (as the store's)."""
    from ppairs_lens.evaluation.store_split import held_out_records

    test = split_records(pair_info(dataset), dataset, **split)[1]
    part = held_out_records(dataset, [r.pair_id for r in test.records], max_pairs, seed)
    return planned_template(bridge, dataset, root, template=template)[1], part


def plan_held_out_run(bridge, datasets: Sequence[Dataset], root, *, template=None, names=None,
                      split: dict | None, forms: Sequence[str],
                      max_pairs: dict | None = None, k: int = 4,
                      train: Dataset | None = None, seed: int = 0) -> list[PlannedStep]:
    """Per dataset: its harvest and each judge form on the held-out side of the split (made
    from the records' own pair information, as the store's), each done when on disk.
    ``split`` None: every pair is judged (``shift``'s shifted sets), the few-shot
    demonstrations drawn from ``train``."""
    steps: list[PlannedStep] = []
    for d in datasets:
        store, tpl = planned_template(bridge, d, root, template=template, names=names)
        # a store another pair limit of this file filled in part harvests only the rest
        pending = pending_records(bridge, d, root, template=template, names=names)
        todo = replace(d, records=[d.records[i] for i in pending]) if pending else d
        steps.append(PlannedStep(d.name, "harvest",
                                 tuple(build_contrast_pairs(bridge.tokenizer, todo, tpl)),
                                 not pending))
        if split is not None:
            demos, test = split_records(pair_info(d), d, **split)[:2]
        else:            # every untied pair, as judge_every_pair judges them
            untied = {p.pair_id for p in pair_info(d) if p.label != TIE}
            test = replace(d, records=[r for r in d.records if r.pair_id in untied])
            demos = train if train is not None else test
        cache = judge_cache(judge_cache_dir(store)) if store is not None else None
        for form in forms:
            kw = {"max_pairs": (max_pairs or {}).get(form), "k": k,
                  "seed": split["seed"] if split is not None else seed}
            try:
                part, prompts = form_prompts(bridge.tokenizer, form, demos, test, tpl, **kw)
            except DataError:  # the judge itself will say why it is skipped
                continue
            name = form if split is not None else f"{form}_every_pair"
            done = cache is not None and cache.has(name, judge_cache_key(
                cache, form, model=store.meta.model, prompts=prompts, records=part, **kw))
            steps.append(PlannedStep(d.name, form, tuple(prompts), done))
    return steps
