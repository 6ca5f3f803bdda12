"""The ``ppairs-lens`` command: every flag reaches what it names, and every bad argument is
refused with one line and exit status 2 before a model loads.

The model loader is replaced by one that records its arguments and returns the tiny model;
the analyses' heavy ``run_*`` functions are replaced by recorders of the config they were given.
"""

from __future__ import annotations

import json
import re

import pytest
import torch

import analyses.ablation
import analyses.cross_dataset
import analyses.layer_sweep
import analyses.ranking
import analyses.replication.run
import ppairs_lens.models.loading
from analyses.cli import COMMANDS, main
from ppairs_lens.presets import max_pairs_at
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.evaluation.bootstrap import N_BOOT
from ppairs_lens.models.hook_points import hook_points
from ppairs_lens.models.spec import ModelSpec

MODEL_COMMANDS = ["harvest", "sweep", "transfer", "ablate", "rank", "run"]


class Loaded(Exception):
    """Raised by the recording loader to stop a command right after its model loads."""


@pytest.fixture
def loads(tiny, monkeypatch):
    """The loader's calls, as (ModelSpec, kwargs); it returns the tiny model."""
    calls: list[tuple] = []

    def fake(name=None, **kw):
        calls.append((name, kw))
        return tiny

    monkeypatch.setattr(ppairs_lens.models.loading, "load_model", fake)
    return calls


def run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as e:  # argparse's own errors
        return e.code


def base(command: str, tmp_path) -> list[str]:
    data = (["--dataset", "larger_number"] if command == "harvest" else
            ["--datasets", "larger_number", "alphabetical"] if command == "transfer" else
            ["--datasets", "story_sentiment" if command == "rank" else "larger_number"])
    return [command, *data, "--stores", str(tmp_path / "stores"),
            "--out", str(tmp_path / ("store" if command == "harvest" else "out"))]


@pytest.mark.parametrize("command", MODEL_COMMANDS)
def test_every_command_loads_with_every_model_flag(command, tmp_path, monkeypatch):
    seen = []

    def stop(name=None, **kw):
        seen.append((name, kw))
        raise Loaded

    monkeypatch.setattr(ppairs_lens.models.loading, "load_model", stop)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # the flag's path, any host
    argv = base(command, tmp_path) + ["--model", "some/model", "--dtype", "bfloat16",
                                      "--device", "cuda:1", "--device-map", "auto",
                                      "--backend", "hooked"]
    with pytest.raises(Loaded):
        main(argv)
    # one ModelSpec from the options, handed to the one loader
    assert seen == [(ModelSpec("some/model", dtype=torch.bfloat16, device="cuda:1",
                               device_map="auto", backend="hooked"), {})]


def template_file(tmp_path, **fields) -> str:
    path = tmp_path / "template.json"
    path.write_text(json.dumps(fields))
    return str(path)


def test_harvest_honours_hooks_template_shards_and_quick(loads, tmp_path, capsys):
    tpl = template_file(tmp_path, kind="comparison", choices=[" A", " B"],
                        assistant="The {comparative} {item} is Choice")
    argv = base("harvest", tmp_path) + ["--max-pairs", "6", "--hooks", "blocks.*.hook_resid_pre",
                                        "--template", tpl, "--shard-size", "4",
                                        "--token-budget", "512"]
    assert run(argv) == 0
    store = ActivationStore.open(tmp_path / "store")
    assert store.complete and store.n_pairs == 6 and store.n_shards == 2
    assert store.hook_names == ["blocks.0.hook_resid_pre", "blocks.1.hook_resid_pre"]
    assert store.meta.template["choices"] == [" A", " B"]
    assert store.meta.template["assistant"] == "The {comparative} {item} is Choice"
    assert store.meta.harvest_settings["token_budget"] == "512"
    assert "6 pairs x 2 x 2 read-outs" in capsys.readouterr().out
    # --quick without --max-pairs: a small store, under --stores
    assert run(["harvest", "--dataset", "larger_number", "--quick",
                "--stores", str(tmp_path / "q")]) == 0
    (meta,) = (tmp_path / "q").rglob("metadata.json")
    assert ActivationStore.open(meta.parent).n_pairs == max_pairs_at("quick")
    assert [c[0].torch_dtype for c in loads] == [torch.float32] * 2


@pytest.fixture
def recorded(monkeypatch):
    """Replaces each analysis' run function by a recorder of its arguments."""
    got: dict = {}

    def rec(key, result):
        def f(*a, **k):
            got[key] = (a, k)
            return result
        return f

    monkeypatch.setattr(analyses.layer_sweep, "run_sweep", rec("sweep", analyses.layer_sweep.SweepResult(selection="", metric="accuracy", ci="", entries=())))
    monkeypatch.setattr(analyses.cross_dataset, "run_transfer", rec("transfer", analyses.cross_dataset.TransferResult(names=(), layer=0, hook="", layers={}, split_by={}, random={}, per_kind={}, rows=(), cosine=(), layer_cosine=())))
    monkeypatch.setattr(analyses.cross_dataset, "print_summary", lambda *a: None)
    monkeypatch.setattr(analyses.ablation, "run_ablation", rec("ablate", analyses.ablation.AblationRows()))
    monkeypatch.setattr(analyses.ablation, "summary_lines", lambda rows: [])
    monkeypatch.setattr(analyses.ranking, "run_ranking",
                        rec("rank", analyses.ranking.RankingRows()))
    monkeypatch.setattr(analyses.replication.run, "run_replication", rec("run", {}))
    return got


def test_sweep_honours_split_quick_hooks_and_template(loads, recorded, tmp_path):
    tpl = template_file(tmp_path, kind="comparison", choices=[" A", " B"],
                        assistant="The answer is Choice")
    argv = base("sweep", tmp_path) + ["--split", "auto", "--quick", "--max-pairs", "8",
                                      "--hooks", "hook_embed", "blocks.1.hook_resid_post",
                                      "--template", tpl]
    assert run(argv) == 0
    stores, out, cfg = recorded["sweep"][0]
    assert cfg.settings.split_by == "auto" and cfg.settings.n_boot == 100 and str(out) == str(tmp_path / "out")
    assert stores[0].hook_names == ["hook_embed", "blocks.1.hook_resid_post"]
    assert stores[0].n_pairs == 8 and stores[0].meta.template["choices"] == [" A", " B"]


def test_transfer_honours_layer_and_split(loads, recorded, tmp_path):
    assert run(base("transfer", tmp_path) + ["--layer", "1", "--split", "pair",
                                             "--max-pairs", "8"]) == 0
    stores, _, cfg = recorded["transfer"][0]
    assert (cfg.layer, cfg.settings.split_by, cfg.settings.n_boot) == (1, "pair", N_BOOT)
    assert cfg.kinds == ("supervised", "pca", "mass_mean", "ccs")          # CCS by default
    assert stores[0].hook_names == hook_points("paper", 2)
    assert run(base("transfer", tmp_path) + ["--kinds", "pca", "ccs", "--max-pairs", "8"]) == 0
    assert recorded["transfer"][0][2].kinds == ("pca", "ccs")


def test_ablate_honours_layer_n_random_split_and_quick(loads, recorded, tmp_path):
    assert run(base("ablate", tmp_path) + ["--layer", "0", "--n-random", "3", "--split", "pair",
                                           "--max-pairs", "8", "--quick"]) == 0
    cfg = recorded["ablate"][0][3]
    assert (cfg.layer, cfg.n_random, cfg.settings.split_by, cfg.max_eval_pairs) == (
        0, 3, "pair", 24)


def test_rank_honours_layer_and_quick(loads, recorded, tmp_path):
    assert run(base("rank", tmp_path) + ["--layer", "-1", "--quick"]) == 0
    (cfg,) = recorded["rank"][0][1]
    assert cfg.layer == -1 and cfg.n_eval_contexts == 3  # --quick's setting


def test_run_honours_split_quick_and_the_loaded_model(loads, recorded, tiny, tmp_path):
    assert run(base("run", tmp_path) + ["--split", "item", "--quick", "--recompute"]) == 0
    (cfg,), kw = recorded["run"]
    assert cfg.settings.split_by == "item" and cfg.settings.quick
    assert cfg.max_pairs == max_pairs_at("quick")
    assert kw == {"reuse": False, "bridge": tiny, "calibrate": True}


def test_run_without_datasets_is_the_replication_where_the_data_is(loads, tiny, tmp_path,
                                                                   monkeypatch):
    import analyses.replication.run

    got = {}
    monkeypatch.setattr(analyses.replication.run, "run_replication",
                        lambda cfg, **kw: got.update(cfg=cfg, kw=kw))
    data = tmp_path / "shared"
    (data / "mctaco").mkdir(parents=True)
    (data / "mctaco" / "dev_3783.tsv").write_text("")  # one of the files it reads is enough
    argv = ["run", "--out", str(tmp_path / "out"), "--shared-data", str(data), "--quick"]
    assert run(argv) == 0
    assert got["cfg"].shared_data == str(data) and got["cfg"].settings.quick
    assert got["cfg"].settings.test_size == 0.5  # the paper's halves unless --test-size
    assert got["kw"] == {"reuse": True, "bridge": tiny, "calibrate": True}


BAD = [  # (argv after the command's base arguments, what the message must say)
    ("harvest", ["--max-pairs", "0"], "--max-pairs: must be at least 1, got 0"),
    ("harvest", ["--max-pairs", "-3"], "must be at least 1, got -3"),
    ("harvest", ["--shard-size", "0"], "--shard-size: must be at least 1"),
    ("harvest", ["--token-budget", "x"], "expected a whole number >= 1"),
    ("harvest", ["--dtype", "float64"], "invalid choice: 'float64'"),
    ("harvest", ["--backend", "jax"], "invalid choice: 'jax'"),
    ("harvest", ["--template", "missing.json"], "template file missing.json: cannot read"),
    ("harvest", ["--template", "{bad json"], "not valid JSON"),
    ("harvest", ["--template", {"kind": "comparison", "asistant": "x"}],
     r"unknown field\(s\) \['asistant'\]"),
    ("harvest", ["--template", {"kind": "statement"}],
     "StatementTemplate does not fit the comparison dataset"),
    ("harvest", ["--template", {"kind": "comparison", "user": "Which {itme}?"}],
     "cannot fill its fields.*'itme'"),
    ("harvest", ["--template", {"kind": "comparison", "choices": ["1"]}],
     "two different non-empty strings"),
    ("harvest", ["--template", {"kind": "comparison", "choices": ["A", "B"]}],
     "the tokenizer merges the choice 'A' with the text before it"),  # needs the tokenizer
    ("sweep", ["--datasets", "typo"], "file typo: no such file, and not a built-in dataset"),
    ("transfer", ["--datasets", "larger_number", "typo"], "not a built-in dataset"),
    ("ablate", ["--datasets", "typo"], "not a built-in dataset"),
    ("rank", ["--datasets", "typo"], "not a built-in dataset"),
    ("run", ["--datasets", "typo"], "not a built-in dataset"),
    ("ablate", ["--n-random", "0"], "--n-random: must be at least 1"),
    ("sweep", ["--split", "contexts"], "invalid choice: 'contexts'"),
    ("transfer", ["--layer", "last"], "--layer: invalid int value"),
    ("transfer", ["--kinds", "lda"], "--kinds: invalid choice: 'lda'"),
]


@pytest.mark.parametrize("command, extra, message", BAD,
                         ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(BAD)])
def test_bad_arguments_fail_in_one_line_before_the_model_loads(command, extra, message, loads,
                                                                tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    extra = list(extra)
    if "--template" in extra:
        i = extra.index("--template") + 1
        if isinstance(extra[i], dict):
            extra[i] = template_file(tmp_path, **extra[i])
        elif extra[i].startswith("{"):
            (tmp_path / "bad.json").write_text(extra[i])
            extra[i] = "bad.json"
    argv = base(command, tmp_path)
    if extra[0] in ("--datasets", "--dataset"):  # replace the base dataset
        argv = [command, *extra, *argv[argv.index("--stores"):]]
    else:
        argv += extra
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"ppairs-lens {command}: error: ")
    assert re.search(message, err), err
    assert loads == []  # no model was loaded


def test_existing_files_as_output_folders_are_refused(loads, tmp_path, capsys):
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    for argv in (["harvest", "--dataset", "larger_number", "--out", str(a_file)],
                 ["sweep", "--out", str(a_file)], ["run", "--stores", str(a_file)]):
        assert run(argv) == 2
        err = capsys.readouterr().err
        assert f"{a_file} is an existing file, not a folder" in err and err.count("\n") == 1
    assert loads == []


def test_template_needs_named_datasets(loads, tmp_path, capsys):
    tpl = template_file(tmp_path, kind="comparison")
    assert run(["sweep", "--template", tpl]) == 2
    assert "name them with --datasets" in capsys.readouterr().err and loads == []


@pytest.mark.parametrize("command, extra, message", [
    ("harvest", ["--hooks", "blocks.*.hook_resid_pots"], "matches no hook point"),
    ("harvest", ["--hooks", "blocks.0.attn.hook_pattern"], "not one vector per token"),
    ("transfer", ["--layer", "3"], r"--layer 3 is out of range: there are 3 read-outs"),
    ("rank", ["--layer", "-4"], "--layer -4 is out of range"),
])
def test_what_needs_the_model_fails_before_any_harvest(command, extra, message, loads,
                                                       recorded, tmp_path, capsys):
    assert run(base(command, tmp_path) + extra) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and err.count("\n") == 1, err
    assert len(loads) == 1 and not recorded
    assert not (tmp_path / "stores").exists() and not (tmp_path / "store").exists()


@pytest.mark.parametrize("device, message", [("cuda", "no CUDA device is available"),
                                             ("gpu0", "not a device torch knows")])
def test_a_device_this_machine_lacks_fails_in_one_line(device, message, tmp_path, monkeypatch,
                                                       capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(ppairs_lens.models.loading, "load_model",
                        lambda *a, **k: pytest.fail("the model loaded before the check"))
    assert main(base("sweep", tmp_path) + ["--device", device]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_sweep_takes_probe_kinds_ccs_included():
    from analyses.cli import build_parser

    args = build_parser().parse_args(["sweep", "--kinds", "supervised", "ccs"])
    assert args.kinds == ["supervised", "ccs"]
    assert build_parser().parse_args(["sweep"]).kinds is None


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_shows_every_option_with_its_meaning_and_default(name, capsys):
    """Each field of a command's options class is an option in its ``--help``, with its help
    and, where the help does not say it, its default."""
    import dataclasses

    with pytest.raises(SystemExit) as stop:
        main([name, "--help"])
    assert stop.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    # each value is named after its option, under one group titled by the command
    assert "options." not in text and "['options']" not in text
    for f in dataclasses.fields(COMMANDS[name]):
        if not f.metadata.get("cmd", True):
            continue
        assert f"{name} options" in text
        custom = f.metadata.get("custom_args", {})
        shown = (custom["metavar"] if f.metadata.get("positional")
                 else f"--{f.name.replace('_', '-')}")
        assert shown in text, f"{name}: {shown}"
        assert custom.get("help"), f"{name} {shown}: no help"
        default = f.default
        if default not in (None, False, dataclasses.MISSING) and "default" not in custom["help"]:
            assert f"{shown} " in text and f"(default: {default})" in text, f"{name} {shown}"


def test_a_config_option_given_wins_over_the_preset_and_one_not_given_leaves_it():
    from analyses.ablation import PRESETS as ABLATION
    from analyses.cli import build_parser
    from analyses.steering import PRESETS, SteeringConfig

    parse = build_parser().parse_args
    quick = PRESETS["quick"].changes
    cfg = parse(["steer", "--quick"]).config(SteeringConfig, PRESETS, stores=[])
    assert (cfg.n_random, cfg.max_eval_pairs) == (quick["n_random"], quick["max_eval_pairs"])
    assert cfg.settings == parse(["steer", "--quick"]).settings and cfg.settings.quick
    cfg = parse(["steer", "--quick", "--n-random", "3", "--alphas", "0.5", "1", "--layer",
                 "2"]).config(SteeringConfig, PRESETS, stores=[], datasets=["x"])
    assert (cfg.n_random, cfg.n_matched, cfg.alphas, cfg.layer) == (3, quick["n_matched"],
                                                                    (0.5, 1.0), 2)
    assert cfg.datasets == ["x"] and cfg.max_eval_pairs == quick["max_eval_pairs"]
    # --stores (the stores' root) is no config option: the config's stores stay as given
    cfg = parse(["ablate", "--stores", "elsewhere"]).config(analyses.ablation.AblationConfig,
                                                            ABLATION, stores=["s"])
    assert cfg.stores == ["s"] and cfg.n_random == analyses.ablation.AblationConfig().n_random


def test_a_value_the_experiment_config_refuses_is_refused_before_the_model_loads(loads, capsys,
                                                                                 tmp_path):
    assert main(["finetune", "--max-train", "1", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ppairs-lens finetune: error:")
    assert not loads
