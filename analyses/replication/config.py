"""The main job's one config, :class:`ReplicationConfig`, and its presets as data.

:data:`PRESETS`: how ``quick`` (a preview, and what the tests run) and ``full`` (the papers'
groups, for a GPU) differ from the defaults, the ``demo`` (``make demo``, whose numbers are in
``figures/``); :data:`BUILTINS`: the generated built-ins in place of the seed experiments'
files (``--builtins``, or a clone without the data).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass, replace

from ppairs_lens.data import BUILTIN_NAMES
from analyses.replication.sets import ADVERSARIAL_SUBSETS, NEWSROOM_ASPECTS, ReplicationSizes
from ppairs_lens.presets import PREVIEWS, Preset, at_preset
from ppairs_lens.evaluation.protocol import PAPER_TEST_SIZE, EvalSettings
from analyses.ablation import AblationConfig
from analyses.controls import ControlsConfig
from analyses.distribution_shift import ShiftConfig
from analyses.finetuning import FinetuningConfig
from analyses.insertion import InsertionConfig
from analyses.layer_sweep import SweepConfig
from analyses.probes_vs_prompting import PvPConfig
from analyses.steering import SteeringConfig
from analyses.thesis_tables import ThesisTablesConfig
from ppairs_lens.evaluation.transfer_fit import TransferConfig
from ppairs_lens.judges.study import AllureConfig, JudgeStudySettings
from ppairs_lens.models.spec import ModelSpec
from ppairs_lens.probes.estimators import ALL_PROBE_KINDS

__all__ = ["BUILTINS", "HOLM_NULLS", "PRESETS", "ReplicationConfig", "replication_config"]


@dataclass(frozen=True)
class ReplicationConfig:
    """The main job; saved as ``replication.config.json`` beside the outputs."""

    model: ModelSpec = ModelSpec()  # default: embedded SmolLM2 on the CPU; a name also loads
    shared_data: str = "../shared/datasets"
    # None: the seed experiments' files in shared_data, at ``sizes``; else these datasets
    # (BUILTINS, paths, path:aspect) instead, each at most ``max_pairs`` pairs (None: all)
    datasets: tuple[str, ...] | None = None
    max_pairs: int | None = None
    extra: list[str] = field(default_factory=list)  # further files (Figure 2 and transfer)
    out: str = "figures"
    stores: str = "stores"
    sizes: ReplicationSizes = ReplicationSizes()
    # One protocol, the same object in every step; the paper fits and tests on random halves.
    settings: EvalSettings = EvalSettings(test_size=PAPER_TEST_SIZE)
    # Each step's own config, nested: its sizes written here and in PRESETS, once; where it
    # reads and its protocol are the run's, set when the step is built (run.step_configs).
    # The judges: 6 training comparisons fit the threshold. ALLURE's pool costs nothing (its
    # zero-shot answers are the training sample's); its held-out pairs are asked again after
    # the demonstrations (a form on a subset: shown, never a claim's comparator), in the demo
    # one demonstration and 2 pairs a dataset, as its prompts are the judges' costliest
    judges: JudgeStudySettings = field(default_factory=lambda: JudgeStudySettings(
        train_pairs=6, allure=AllureConfig(per_round=1, pool=6, test_pairs=2)))
    sweep: SweepConfig = field(default_factory=SweepConfig)
    probes_vs_prompting: PvPConfig = field(default_factory=PvPConfig)
    thesis_tables: ThesisTablesConfig = field(default_factory=ThesisTablesConfig)
    # Transfer and cosines: all four kinds; CCS (gradient descent, too slow to validate at every
    # read-out) is fitted at the cosine read-out only (readout_choice.add_kinds_at)
    transfer: TransferConfig = field(default_factory=lambda: TransferConfig(
        kinds=ALL_PROBE_KINDS))
    shift: ShiftConfig = field(default_factory=ShiftConfig)
    # Probes against LoRA and full finetuning (paper Section 5.2): short prompts, as a
    # training example costs ~3-6 CPU-seconds; one set in the demo (--full: three). Reading
    # the test pairs costs most (~0.45 s a pair, both orders), so the demo tests on 20 of the
    # 50 held-out ROCStories pairs, a preview: differences of 0.02-0.05 between near-chance
    # methods need hundreds of groups. The zero-shot judge's answers are the judges step's.
    # The label curve (nested label sets, a test read per point) has one point in a preview,
    # the comparison's 8 labels (--full: 25 to 200)
    finetune_datasets: tuple[str, ...] = ("rocstories",)
    finetuning: FinetuningConfig = field(default_factory=lambda: FinetuningConfig(
        max_train=8, max_test=20, curve_sizes=(8,)))
    # The ablation and the steering run on this dataset.
    ablation_dataset: str = "mt-bench"
    # 20 + 20 nulls: Holm over three directions needs 60 + 60 (1/61 < 0.05/3; --full 100),
    # but the demo's MT-Bench judge gives the same raw answer on every pair, so no ablation
    # claim is tested at its size; the step shows the design and says so. 12 held-out pairs:
    # the pass over their long prompts is most of its time (~2 s a pair, ~0.3 s a null at
    # 20 pairs); 12 keep it <= 35 s
    ablation: AblationConfig = field(default_factory=lambda: AblationConfig(
        n_random=20, n_matched=20, max_eval_pairs=12))
    # random and variance-matched directions each: Holm needs 60 (--full); the demo shows
    # the design at two doses (x the read-out's norm) on 4 pairs, decides nothing
    steering: SteeringConfig = field(default_factory=lambda: SteeringConfig(
        n_random=4, n_matched=4, alphas=(-1.0, 1.0), max_eval_pairs=4))
    # all 300 test statements, each paired with the ClimateX paper's own GPT-4 and GPT-3.5
    # predictions (the claims' power is in statements). Probe training (~36 s) plus placement,
    # whose tokens grow with k (~51 shared, ~97 per comparison; 2 rounds of 4 levels): k=4
    # takes ~265 s for 300, k=2 ~165 s. So the demo compares with 2 references a step (the
    # thesis and --full 10), to place all 300 within its 20 minutes, trains on 60 labelled
    # statements (balanced) and 120 of their pairs, runs the probe alone (zero_shot doubles
    # the time), and shows its skill first on 60 disjoint held-out pairs of test statements
    insertion: InsertionConfig = field(default_factory=lambda: InsertionConfig(
        max_test=300, k=2, n_train=60, max_train_pairs=120, pairwise_pairs=60,
        methods=("probe",)))
    # the controls with known answers (analyses.controls): a built-in of short prompts,
    # 160 pairs over its 40 leak groups (~20 s of harvest)
    controls: ControlsConfig = field(default_factory=lambda: ControlsConfig(n_pairs=160))

    def __post_init__(self):
        # frozen, so the protocol set here on every step stays the study's (and its saved
        # config says so): a changed config is a new one, made through this again
        object.__setattr__(self, "model", ModelSpec.coerce(self.model))
        for f in fields(self):
            step = getattr(self, f.name)
            if is_dataclass(step) and "settings" in {g.name for g in fields(step)}:
                object.__setattr__(self, f.name, replace(step, settings=self.settings))
        object.__setattr__(self, "judges", replace(self.judges, protocol=self.settings))


#: Nulls per kind for Holm over three directions at 0.05: the smallest permutation p,
#: 1 / (K + 1), must be below 0.05 / 3, so K >= 60; 100 leaves room for a test that is not first
HOLM_NULLS = 100

#: How each preset differs from the defaults (the demo's); each size is written once.
PRESETS: dict[str, Preset] = {
    # A preview in under 3 minutes (and what the tests run). Every step runs; the model's
    # passes over long prompts are what a preview costs, so each step asks a few pairs and
    # figures are PNG only. Few claims have the groups a test needs: most verdicts are "not
    # tested at this size".
    "quick": Preset(changes={
        # Long items are most of a preview's tokens: HANNA's stories (~740 tokens a pair, and
        # 6 contexts at least before both halves hold both labels) are left out, MT-Bench and
        # LLMBar cut hardest; each dataset keeps 2+ groups a side
        "sizes": {"summeval_contexts": 6, "summeval_aspects": ("coherence",),
                  "hanna_contexts": 0, "story_cloze_pairs": 16, "mctaco_pairs": 16,
                  "mctaco_per_question": None, "caters_stories": 8,
                  "mt_bench_pairs": 12, "mt_bench_per_question": None, "llmbar_pairs": 16,
                  "newsroom_contexts": 0,
                  # one shifted set, the shortest pairs (~525 characters)
                  "llmbar_adversarial": ("Adversarial_GPTOut",)},
        "max_pairs": PREVIEWS["quick"].max_pairs,   # the built-ins': every preview's cap
        "judges": {"train_pairs": 3, "allure": AllureConfig(per_round=1, pool=4, test_pairs=2)},
        "ablation": {"n_random": 4, "n_matched": 4, "max_eval_pairs": 2},
        "steering": {"n_random": 2, "n_matched": 2, "max_eval_pairs": 2},
        "finetuning": {"max_train": 4, "max_test": 4, "curve_sizes": (4,)},
        "insertion": {"max_test": 4, "n_train": 16, "max_train_pairs": 16,
                      "pairwise_pairs": 2},
        "controls": {"n_pairs": 80}}),
    # The papers' groups on a GPU, sized to decide and to end inside one 9-minute call. A
    # claim's power comes from its groups (articles, stories, questions), not from the pairs
    # inside one, so every group the files hold is kept, each with fewer items: SummEval's
    # 10 of 16 summaries (45 pairs an article, not 120; each held-out article still sorted
    # from its own pairs), HANNA's 5 of 11 systems (10 pairs a story, not 55: its ~740-token
    # pairs share no prefix). NEWSROOM and the short sets are the papers' own. ALLURE runs one
    # round (no extra pass; a second would re-ask the pool with demonstrations, ~50 s of an
    # H200); the steering's 60 + 60 nulls are Holm's least; finetuning runs on the three short
    # or mid-length sets.
    "full": Preset(changes={
        "sizes": {"summeval_contexts": 100, "summeval_items": 10, "hanna_contexts": 96,
                  "hanna_items": 5, "story_cloze_pairs": 1871, "mctaco_pairs": 5000,
                  "mctaco_per_question": None, "caters_stories": 200,
                  "caters_per_story": None,
                  "mt_bench_pairs": 200, "mt_bench_per_question": None, "llmbar_pairs": None,
                  "newsroom_contexts": 60,
                  "newsroom_aspects": NEWSROOM_ASPECTS,
                  "llmbar_adversarial": tuple(ADVERSARIAL_SUBSETS),
                  "llmbar_adversarial_pairs": None},
        "judges": {"train_pairs": 400,
                   "allure": AllureConfig(per_round=2, pool=100, test_pairs=100)},
        "ablation": {"max_eval_pairs": 100, "n_random": HOLM_NULLS, "n_matched": HOLM_NULLS},
        "steering": {"n_random": 60, "n_matched": 60, "max_eval_pairs": 50,
                     "alphas": (-1.0, -0.5, 0.5, 1.0)},
        "finetune_datasets": ("rocstories", "mctaco", "caters"),
        "finetuning": {"max_train": 200, "max_test": 200, "curve_sizes": (25, 50, 100, 200)},
        "insertion": {"k": 10, "n_train": 100, "max_train_pairs": 400,
                      "methods": ("probe", "zero_shot")}}),
}

#: The built-ins in place of the seed experiments' files: lexically solvable generated
#: datasets, kept as examples and for fast tests. ``full`` has nothing to size here, and the
#: command line refuses it with the built-ins.
BUILTINS: dict[str, object] = {"datasets": tuple(BUILTIN_NAMES),
                               "ablation_dataset": "larger_number"}


def replication_config(preset: str = "demo", **fields) -> ReplicationConfig:
    """``ReplicationConfig(**fields)`` at ``preset`` (quick, demo or full): the fields given
    win over the preset's, but ``settings`` is made a preview's where the preset is one."""
    cfg = at_preset(ReplicationConfig(**fields), PRESETS, preset)
    return replace(cfg, **{k: v for k, v in fields.items() if k != "settings"})
