"""The ``ppairs-lens`` command's options: how each is parsed, the checks made before any model
loads, and the one model loader every command uses (:func:`load_model_from_args`).

Everything that can be checked without a model is checked here, so a typo costs no model load:
numbers while parsing (one-line errors, exit status 2), dataset specs and the template file
by loading them (:func:`check_args`). What needs the model (hook names, the range of
``--layer``) is checked right after it loads, before any harvest.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from pathlib import Path

from ppairs_lens.errors import PPairsError
from ppairs_lens.presets import DEMO, PRESET_NAMES, PREVIEWS, max_pairs_at, settings_at

__all__ = ["OneLineParser", "PREVIEW_CAPPED", "SPLITS", "add_calibration",
           "add_data_commands",
           "add_dataset_options", "add_eval_settings", "add_hooks", "add_judges", "add_kinds",
           "add_layer", "add_model_options", "add_seed", "add_split", "add_template",
           "check_args", "check_layer", "eval_settings_from_args", "finite_float",
           "finite_number", "load_model_from_args",
           "positive_int", "preset_name", "seed_int", "share", "DEFAULT_SHARED_DATA"]

SPLITS = ("auto", "context", "item", "pair")
#: Commands whose datasets a preview preset caps (``ppairs_lens.presets.max_pairs_at``;
#: ``--max-pairs`` wins); ``run`` caps its ``--builtins`` / ``--datasets`` through its quick
#: preset, with the same number, and ``rank`` sizes its contexts through its own.
PREVIEW_CAPPED = ("harvest", "sweep", "transfer", "ablate", "steer", "finetune", "shift")
#: The presets a flag of their name picks (``--quick``, ``--full``); none: the demo.
FLAG_PRESETS = tuple(n for n in PRESET_NAMES if n != DEMO)
TEMPLATE_HELP = ("prompt template file: a JSON object with \"kind\" (\"comparison\" or "
                 "\"statement\") and any ComparisonTemplate / StatementTemplate fields to change "
                 "(user, assistant, choices, system, context_block, no_context_block, "
                 "include_description), e.g. {\"kind\": \"comparison\", \"choices\": "
                 "[\" A\", \" B\"], \"assistant\": \"The {comparative} {item} is Choice\"}; "
                 "applies to every dataset, which must be of its kind; the two prompts must "
                 "differ in their final token only")


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (and exit status 2). A command with the
    evaluation options (:func:`add_eval_settings`) gets them as ONE record, ``args.settings``
    (:func:`eval_settings_from_args`), and a command with a preset's flag the preset its
    options pick, ``args.preset`` (:func:`preset_name`): what every experiment's ``cli``
    reads."""

    def parse_known_args(self, args=None, namespace=None):
        ns, rest = super().parse_known_args(args, namespace)
        if any(hasattr(ns, n) for n in FLAG_PRESETS) and not hasattr(ns, "preset"):
            ns.preset = preset_name(ns)
        if hasattr(ns, "n_boot") and not hasattr(ns, "settings"):
            ns.settings = eval_settings_from_args(ns)
        return ns, rest

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _whole_number(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= {least}, got {text!r}") \
            from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
    return value


def positive_int(text: str) -> int:
    return _whole_number(text, 1)


def pair_limit(text: str) -> tuple[str | None, int]:
    """``N`` (every dataset) or ``NAME=N`` (the dataset of that name): one ``--max-pairs``
    entry."""
    name, sep, n = text.rpartition("=")
    if not sep:
        return None, positive_int(text)
    if not name.strip():
        raise argparse.ArgumentTypeError(f"expected N or NAME=N, got {text!r}")
    return name.strip(), positive_int(n)


class PairLimitsAction(argparse.Action):
    """``--max-pairs N NAME=N ...`` as one :class:`~ppairs_lens.data.specs.PairLimits`."""

    def __call__(self, parser, namespace, values, option_string=None):
        from ppairs_lens.data.specs import PairLimits

        bare = [n for name, n in values if name is None]
        if len(bare) > 1:
            raise argparse.ArgumentError(self, f"one limit for every dataset at most, got "
                                               f"{' '.join(map(str, bare))}")
        try:
            limits = PairLimits(bare[0] if bare else None,
                                tuple((name, n) for name, n in values if name is not None))
        except ValueError as e:
            raise argparse.ArgumentError(self, str(e)) from None
        setattr(namespace, self.dest, limits)


def add_max_pairs(p: argparse.ArgumentParser, what: str = "dataset") -> None:
    p.add_argument("--max-pairs", nargs="+", type=pair_limit, action=PairLimitsAction,
                   default=None, metavar="N|NAME=N",
                   help=f"use at most N pairs of each {what} (a prefix of one seeded order of its "
                        "contexts, so the last context may be cut), or of the one named NAME (its @Name, else its file's name); "
                        "every limit of a file shares its store: a smaller one reads pairs "
                        "a larger one harvested")


def seed_int(text: str) -> int:
    """A seed: a whole number >= 0 (numpy's generators refuse negative seeds, which would
    surface only after the harvest)."""
    return _whole_number(text, 0)


def share(text: str) -> float:
    """A share strictly between 0 and 1 (``--test-size``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") \
            from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be strictly between 0 and 1, got {value}")
    return value


def template_file(text: str):
    """``--template FILE`` -> the template (read and checked while parsing)."""
    from ppairs_lens.activations.template_files import load_template

    try:
        return load_template(text)
    except PPairsError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_model_options(p: argparse.ArgumentParser) -> None:
    from ppairs_lens.models.loading import BACKENDS

    p.add_argument("--model", default=None,
                   help="HF model id or local folder (default: the embedded SmolLM2-135M-Instruct)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--device", default=None, help="e.g. cpu, cuda, cuda:1")
    p.add_argument("--device-map", default=None,
                   help="e.g. auto: spread a model too big for one GPU over the visible GPUs")
    p.add_argument("--backend", default="bridge", choices=list(BACKENDS),
                   help="bridge: TransformerBridge (default); hooked: a classic "
                        "HookedTransformer (transformer-lens<4)")
    quick = PREVIEWS["quick"]
    p.add_argument("--quick", action="store_true",
                   help="the quick preset, for a preview or a test: the experiment's own "
                        f"small sizes (its config's PRESETS), at most {quick.n_boot} "
                        f"resamples, PNG figures only; {', '.join(PREVIEW_CAPPED)} and run "
                        f"--builtins: at most {quick.max_pairs} pairs per dataset unless "
                        "--max-pairs")


def add_dataset_options(p: argparse.ArgumentParser, many: bool = False) -> None:
    if many:
        p.add_argument("--datasets", nargs="+", default=None,
                       help="built-in names or paths (path:aspect for scored-items files)")
    else:
        p.add_argument("--dataset", required=True,
                       help="built-in name or a path (path:aspect for scored-items files)")
    add_max_pairs(p)
    p.add_argument("--stores", default="stores", help="root folder of activation stores")


def add_data_commands(sub) -> None:
    """``data fetch [--to DIR]``: the replication's files from their public sources."""
    data = sub.add_parser("data", help="the replication's data files")
    fetch = data.add_subparsers(dest="data_command", required=True).add_parser(
        "fetch", help="download every file of the provenance table at its pinned commit, "
                      "verify its SHA-256, lay the files out like ../shared/datasets (base URL: "
                      "$PPAIRS_LENS_DATA_MIRROR, else raw.githubusercontent.com)")
    fetch.add_argument("--to", default=None, metavar="DIR",
                       help="folder to fill (default: the package cache's datasets folder, "
                            "$PPAIRS_LENS_CACHE/datasets or ~/.cache/ppairs-lens/datasets)")


def add_seed(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=seed_int, default=0,
                   help="seed of the dataset subsets, splits and bootstrap resamples (default 0)")


def add_eval_settings(p: argparse.ArgumentParser, split: bool = True) -> None:
    """The shared evaluation protocol's options (one record,
    :class:`ppairs_lens.evaluation.protocol.EvalSettings`; read back by
    :func:`eval_settings_from_args`): ``--seed``, ``--n-boot`` and, with ``split``,
    ``--test-size`` and ``--split-by`` (alias ``--split``)."""
    add_seed(p)
    p.add_argument("--n-boot", type=positive_int, default=None,
                   help="bootstrap resamples of every confidence interval (default 2000; "
                        f"--quick {PREVIEWS['quick'].n_boot})")
    if split:
        p.add_argument("--test-size", type=share, default=None,
                       help="held-out share of the leak groups (default 0.3; the replication "
                            "0.5, as the paper)")
        add_split(p)


def eval_settings_from_args(args, base=None):
    """The one :class:`~ppairs_lens.evaluation.protocol.EvalSettings` of a command: ``base``
    (default: the built-ins' protocol) at the preset the options pick (a preview's with
    ``--quick``), then every option given."""
    from ppairs_lens.evaluation.protocol import EvalSettings

    s = settings_at(base if base is not None else EvalSettings(), preset_name(args))
    given = {"seed": getattr(args, "seed", None), "n_boot": getattr(args, "n_boot", None),
             "test_size": getattr(args, "test_size", None),
             "split_by": getattr(args, "split", None)}
    return s.but(**{k: v for k, v in given.items() if v is not None})


def add_split(p: argparse.ArgumentParser) -> None:
    p.add_argument("--split-by", "--split", dest="split", default="auto", choices=SPLITS,
                   help="how held-out pairs are chosen so that nothing leaks: auto (default: "
                        "whole groups where records share one (a context, an item block, a "
                        "statement's subject), else items if they recur (cross pairs "
                        "dropped), else pairs), context (whole groups), item, or pair")


def add_layer(p: argparse.ArgumentParser, default: int | None, help_: str) -> None:
    p.add_argument("--layer", type=int, default=default, help=help_)


def add_kinds(p: argparse.ArgumentParser, help_: str) -> None:
    """``--kinds``: probe kinds, any of ``ALL_PROBE_KINDS`` (default None: the command's own)."""
    from ppairs_lens.probes.estimators import ALL_PROBE_KINDS

    p.add_argument("--kinds", nargs="+", choices=list(ALL_PROBE_KINDS), default=None,
                   metavar="KIND", help=f"{help_} (choose from {', '.join(ALL_PROBE_KINDS)})")


def judge_limit(text: str) -> tuple[str, int]:
    """``FORM=N`` (``--judge-max-pairs``): a judge form and its most held-out pairs."""
    from ppairs_lens.judges.held_out import JUDGE_FORMS

    form, sep, n = text.partition("=")
    if not sep or form not in JUDGE_FORMS:
        raise argparse.ArgumentTypeError(f"expected FORM=N with FORM one of "
                                         f"{', '.join(JUDGE_FORMS)}, got {text!r}")
    return form, positive_int(n)


def add_judges(p: argparse.ArgumentParser, default: tuple[str, ...] | None = None) -> None:
    """``--judges`` (which prompted judge forms run; ``none``: no judge; ``default``: all of
    ``JUDGE_FORMS``) and ``--judge-max-pairs FORM=N`` (each form on a seeded subset of whole
    held-out contexts; ``args.judge_max_pairs`` is a list of ``(form, n)``); ``none`` with a
    form is refused by :func:`check_args`."""
    from ppairs_lens.judges.held_out import JUDGE_FORMS

    default = tuple(default or JUDGE_FORMS)
    p.add_argument("--judges", nargs="+", default=list(default),
                   choices=[*JUDGE_FORMS, "none"], metavar="FORM",
                   help=f"prompted judge forms run on the held-out pairs (choose from "
                        f"{', '.join(JUDGE_FORMS)}; none: no judge; default: "
                        f"{' '.join(default)}). Finished judges are remembered beside their "
                        "store and reused")
    p.add_argument("--judge-max-pairs", nargs="+", type=judge_limit, default=[],
                   metavar="FORM=N",
                   help="run a judge form on at most N held-out pairs (whole contexts, seeded), "
                        "e.g. few_shot=40 (its long prompts cost most)")


def add_calibration(p: argparse.ArgumentParser) -> None:
    """``--no-calibration``: time no prompts before the work; the estimate uses the rates an
    earlier run measured on this model, device and thread count, and leaves out the rest."""
    p.add_argument("--no-calibration", action="store_true",
                   help="skip timing a few prompts before the work: the estimate uses the "
                        "rates remembered from an earlier run on this model and device "
                        "(measured rates are remembered in the cache's rates.json)")


def add_template(p: argparse.ArgumentParser) -> None:
    p.add_argument("--template", type=template_file, default=None, metavar="FILE",
                   help=TEMPLATE_HELP)


def add_hooks(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hooks", nargs="+", default=None, metavar="HOOK",
                   help="read-outs: hook names, presets (paper, full) or glob patterns such as "
                        "'blocks.*.hook_resid_pre' (default: every block's hook_resid_post and "
                        "ln_final.hook_out)")


def finite_number(text: str) -> float:
    """A finite number (``generate --alpha``: its bound depends on ``--raw-alpha``, checked
    before the model loads where it can be, :func:`analyses.cli` ``_check_generate``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def finite_float(text: str) -> float:
    """A steering strength (``--alphas``, ``--alpha``): a finite number (:func:`finite_number`)
    within :data:`~ppairs_lens.interventions.steering.MAX_ALPHA` (``1e39`` overflows the
    activations)."""
    from ppairs_lens.interventions.steering import check_alpha

    value = finite_number(text)
    try:
        return check_alpha(value, text)
    except PPairsError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


#: Where ``run`` looks for the seed experiments' data unless ``--shared-data`` says.
DEFAULT_SHARED_DATA = "../shared/datasets"


def preset_name(args) -> str:
    """The preset a command's options pick: ``quick``, ``full`` or the defaults, ``demo``
    (both flags together are refused by :func:`check_args`); the parser sets it as
    ``args.preset``, which wins."""
    return getattr(args, "preset", None) or next(
        (n for n in FLAG_PRESETS if getattr(args, n, False)), DEMO)

def check_args(args) -> None:
    """Every check that needs no model: output folders (an existing file, or not writable),
    ``run``'s presets and data folder, dataset specs (loaded), the template against each
    dataset. A preview without ``--max-pairs`` caps the pairs here."""
    from ppairs_lens.activations.template_files import check_template_fits
    from ppairs_lens.data.specs import PairLimits, load_dataset_spec
    from ppairs_lens.io.atomic import check_output_folder

    for flag in ("out", "stores", "save_probes"):
        if getattr(args, flag, None) is not None:  # stores already there may only be read
            check_output_folder(getattr(args, flag), f"--{flag.replace('_', '-')}",
                                may_be_read_only=flag == "stores")
    _check_device(getattr(args, "device", None))
    if args.command == "run":
        _check_run(args)
    judges = getattr(args, "judges", None) or []
    if "none" in judges and len(set(judges)) > 1:
        raise PPairsError(f"--judges none cannot be combined with other forms "
                          f"({' '.join(j for j in judges if j != 'none')})")
    limits = getattr(args, "max_pairs", None)
    cap = max_pairs_at(preset_name(args))
    if (cap is not None and args.command in PREVIEW_CAPPED
            and (limits is None or limits.default is None)):
        args.max_pairs = replace(limits or PairLimits(), default=cap)
    specs = [args.dataset] if getattr(args, "dataset", None) else (getattr(args, "datasets", None)
                                                                   or [])
    specs = [*specs, *(getattr(args, "train", None) or []), *(getattr(args, "test", None) or [])]
    template = getattr(args, "template", None)
    if template is not None and not specs:
        raise PPairsError("--template applies to every dataset: name them with --datasets "
                          "(the default ones are of both kinds)")
    tokenizer = _tokenizer(args) if template is not None else None
    for spec in getattr(args, "extra", None) or []:  # run's --extra files, read the same way
        load_dataset_spec(spec, max_pairs=getattr(args, "max_pairs", None), seed=args.seed)
    loaded = {}
    for spec in specs:
        dataset = load_dataset_spec(spec, max_pairs=getattr(args, "max_pairs", None),
                                    seed=args.seed)
        if template is not None:
            check_template_fits(template, dataset, tokenizer)
        loaded[spec] = dataset
    if getattr(args, "train", None) and getattr(args, "test", None):
        _check_shift_sets(args.train, args.test, loaded)
    _check_names(loaded)
    _check_limit_names(getattr(args, "max_pairs", None), loaded)


def _check_limit_names(limits, loaded: dict) -> None:
    """A named ``--max-pairs`` must name a dataset of the command (a misspelt name would
    leave that dataset unlimited)."""
    from ppairs_lens.data.specs import limit_names

    if limits is None or not limits.named:
        return
    names = sorted({n for spec, d in loaded.items() for n in limit_names(spec, d)})
    for name in limits.unknown(names):
        raise PPairsError(f"--max-pairs {name}={limits.of(name)}: no dataset here is named "
                          f"{name!r} (the names: {', '.join(names) or 'none'}); use a dataset's "
                          "@Name or its file's name")


#: Untied pairs a shifted (test) set needs for a drop to be measured at all.
MIN_UNTIED_TEST_PAIRS = 2


def _pair_key(r) -> tuple:
    if not hasattr(r, "item1"):                     # a statement: its text
        return (getattr(r, "statement", None) or getattr(r, "text", ""),)
    return (r.context or "", *sorted((r.item1, r.item2)))


def _check_shift_sets(train: list[str], test: list[str], loaded: dict) -> None:
    """A shifted set must share no pair with the training sets (a "drop" measured partly on
    training pairs is none) and hold enough untied pairs to be scored."""
    seen = {_pair_key(r): spec for spec in train for r in loaded[spec].records}
    for spec in test:
        recs = loaded[spec].records
        shared = [seen[_pair_key(r)] for r in recs if _pair_key(r) in seen]
        if shared:
            raise PPairsError(f"--test {spec} shares {len(shared)} of its {len(recs)} pairs with "
                              f"the training set {shared[0]}: a drop on them would be measured "
                              "partly on training pairs; give a test set of other pairs")
        untied = sum(r.label in (1, 2) for r in recs if hasattr(r, "item1"))
        if all(hasattr(r, "item1") for r in recs) and untied < MIN_UNTIED_TEST_PAIRS:
            raise PPairsError(f"--test {spec} has {untied} untied pair(s) of {len(recs)}: too few "
                              f"to score (at least {MIN_UNTIED_TEST_PAIRS})")


def _check_names(loaded: dict) -> None:
    """Display names are unique in a run: two datasets under one name would be merged in every
    table."""
    by_name: dict[str, str] = {}
    for spec, d in loaded.items():
        if d.name in by_name and by_name[d.name] != spec:
            raise PPairsError(f"{by_name[d.name]} and {spec} are both named {d.name!r}: their "
                              "rows would merge in every table; name one with @Name")
        by_name[d.name] = spec


def _check_run(args) -> None:
    """``run``: one preset at most; a data folder given with ``--shared-data`` must exist and
    hold at least one of the replication's files (the default one may be absent: a clone
    without ``../shared`` runs the built-ins, and says so)."""
    from analyses.replication.sets import replication_files

    given = [f"--{p}" for p in FLAG_PRESETS if getattr(args, p, False)]
    if len(given) > 1:
        raise PPairsError(f"{' and '.join(given)} exclude each other: choose one preset")
    explicit = getattr(args, "shared_data", None) is not None
    args.shared_data_given = explicit  # only the default folder may be fetched in its place
    if not explicit:
        args.shared_data = DEFAULT_SHARED_DATA
    root = Path(args.shared_data)
    expected = replication_files()
    if explicit and not root.is_dir():
        raise PPairsError(f"--shared-data {root}: no such folder (expected the seed "
                          f"experiments' data: {', '.join(expected)})")
    builtins = bool(getattr(args, "builtins", False) or getattr(args, "datasets", None))
    if getattr(args, "extra", None) and (builtins or not root.is_dir()):
        why = ("--builtins or --datasets runs the main job on the built-ins" if builtins else
               f"{root} is absent, so the main job runs on the built-ins")
        raise PPairsError(f"--extra adds files to the replication, but {why}: the files would "
                          "be ignored")
    if getattr(args, "full", False) and builtins:
        raise PPairsError("--full sizes the replication to the papers' data, but --builtins or "
                          "--datasets runs the main job on the built-ins, which has no such "
                          "size: drop one")
    if getattr(args, "max_pairs", None) is not None and args.max_pairs.named:
        raise PPairsError("run takes one --max-pairs for every dataset (its --builtins or "
                          "--datasets), not NAME=N")
    if builtins or not root.is_dir():
        return  # the main job on the built-ins (the folder is not read)
    if getattr(args, "max_pairs", None) is not None:
        raise PPairsError(f"--max-pairs sizes the built-ins or --datasets files, but the main "
                          f"job reads the seed experiments' files in {root} at its preset's "
                          "sizes (--quick, the demo, --full): drop --max-pairs, or add "
                          "--builtins / --datasets")
    if not any((root / rel).is_file() for rel in expected):
        raise PPairsError(f"--shared-data {root} holds none of the replication's datasets "
                          f"(expected at least one of {', '.join(expected)})")


def _check_device(device: str | None) -> None:
    """A device torch knows and this machine has (else torch fails deep inside the load)."""
    if device is None:
        return
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise PPairsError(f"--device {device!r} is not a device torch knows (e.g. cpu, cuda, "
                          "cuda:1, mps)") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise PPairsError(f"--device {device}: no CUDA device is available on this machine")


def _tokenizer(args):
    """The model's tokenizer, to check a template's contrast pairs before the model loads; None
    where it cannot be had without the model (the model's own load then says why)."""
    from ppairs_lens.models.tokenizer import load_tokenizer

    try:
        return load_tokenizer(args.model)
    except Exception:  # noqa: BLE001 - any failure here is reported by the model load instead
        return None


def load_model_from_args(args):
    """The model every command loads: ``--model`` with ``--dtype``, ``--device``,
    ``--device-map`` and ``--backend``."""
    from ppairs_lens.models.loading import load_model
    from ppairs_lens.models.spec import ModelSpec

    return load_model(ModelSpec.from_args(args))


def check_layer(args, n_readouts: int) -> None:
    """Refuse a ``--layer`` outside the ``n_readouts`` read-outs (negative counts from the end)."""
    layer = getattr(args, "layer", None)
    if layer is not None and not -n_readouts <= layer < n_readouts:
        raise PPairsError(f"--layer {layer} is out of range: there are {n_readouts} read-outs "
                          f"(0..{n_readouts - 1}, or -{n_readouts}..-1 from the end)")
