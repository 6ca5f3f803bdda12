"""The command line refuses, in one line with exit status 2 and before any model loads, what
the input alone decides: presets that exclude each other, a data folder without the data,
output folders that are files, non-finite coefficients, config values the analysis would
refuse only after its harvest."""

from __future__ import annotations

import pytest

import ppairs_lens.models.loading
from analyses.cli import main


@pytest.fixture
def no_model(monkeypatch):
    monkeypatch.setattr(ppairs_lens.models.loading, "load_model",
                        lambda *a, **k: pytest.fail("the model loaded before the check"))


def refused(argv, capsys) -> str:
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own errors
        code = e.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_quick_and_full_exclude_each_other(no_model, tmp_path, capsys):
    err = refused(["run", "--quick", "--full", "--out", str(tmp_path / "o")], capsys)
    assert "--quick and --full exclude each other" in err


@pytest.mark.parametrize("study", [["--builtins"], ["--datasets", "larger_number"]])
def test_full_is_refused_where_the_builtins_study_would_ignore_it(no_model, tmp_path, capsys,
                                                                 study):
    err = refused(["run", "--full", *study, "--out", str(tmp_path / "o")], capsys)
    assert "--full sizes the replication" in err


def test_a_data_folder_without_the_datasets_is_refused(no_model, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    err = refused(["run", "--shared-data", str(empty), "--out", str(tmp_path / "o")], capsys)
    assert f"--shared-data {empty} holds none of the replication's datasets" in err
    assert "summeval/summeval.jsonl" in err  # says what it expected
    err = refused(["run", "--shared-data", str(tmp_path / "typo")], capsys)
    assert "typo: no such folder" in err
    (tmp_path / "f").write_text("x")
    assert "no such folder" in refused(["run", "--shared-data", str(tmp_path / "f")], capsys)
    assert not (tmp_path / "o").exists()


def test_extra_files_a_run_would_ignore_are_refused(no_model, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ../shared/datasets here
    (tmp_path / "x.csv").write_text("")
    err = refused(["run", "--builtins", "--extra", "x.csv"], capsys)
    assert "--extra adds files to the replication, but --builtins" in err
    err = refused(["run", "--extra", "x.csv"], capsys)
    assert "../shared/datasets is absent" in err


def test_run_extra_files_are_read_before_the_model(no_model, tmp_path, capsys):
    data = tmp_path / "shared"
    (data / "mctaco").mkdir(parents=True)
    (data / "mctaco" / "dev_3783.tsv").write_text("")
    err = refused(["run", "--shared-data", str(data), "--extra", str(tmp_path / "nope.csv")],
                  capsys)
    assert "nope.csv" in err


@pytest.mark.parametrize("command", ["sweep", "transfer"])
def test_save_probes_into_a_file_is_refused_before_the_sweep(command, no_model, tmp_path,
                                                              capsys):
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    for target in (a_file, a_file / "sub"):
        err = refused([command, "--datasets", "larger_number", "--out", str(tmp_path / "o"),
                       "--save-probes", str(target)], capsys)
        assert f"--save-probes {target}" in err and "is an existing file, not a folder" in err
    assert not (tmp_path / "o").exists()


def test_an_output_folder_under_a_file_is_refused(no_model, tmp_path, capsys):
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    for argv in (["sweep", "--out", str(a_file / "figures")],
                 ["harvest", "--dataset", "larger_number", "--stores", str(a_file / "s")]):
        assert f"{a_file} is an existing file" in refused(argv, capsys)


@pytest.mark.parametrize("alphas, message", [
    (["nan"], "--alphas: must be a finite number, got 'nan'"),
    (["1", "inf"], "--alphas: must be a finite number, got 'inf'"),
    (["=-inf"], "must be a finite number"),
    (["0", "0"], "at least one non-zero steering coefficient"),
])
def test_non_finite_or_all_zero_steering_coefficients(alphas, message, no_model, tmp_path,
                                                      capsys):
    flag = ["--alphas" + alphas[0]] if alphas[0].startswith("=") else ["--alphas", *alphas]
    err = refused(["steer", "--datasets", "larger_number", "--out", str(tmp_path / "o"), *flag],
                  capsys)
    assert message in err


@pytest.mark.parametrize("argv, message", [
    (["transfer", "--kinds", "ccs", "--datasets", "larger_number", "alphabetical"],
     "add one of"),
    (["transfer", "--datasets", "larger_number", "larger_number"],
     "transfer needs at least 2 different datasets"),
    (["finetune", "--max-train", "2", "--datasets", "larger_number"],
     "max_train must be at least 4"),
    (["sweep", "--seed", "-1"], "--seed: must be at least 0, got -1"),
    (["finetune", "--curve-seeds", "0", "-2"], "--curve-seeds: must be at least 0, got -2"),
])
def test_config_checks_run_before_the_model(argv, message, no_model, tmp_path, capsys):
    err = refused([*argv, "--stores", str(tmp_path / "s"), "--out", str(tmp_path / "o")],
                  capsys)
    assert message in err
    assert not (tmp_path / "s").exists()


def test_an_unwritable_output_folder_is_refused_but_a_read_only_store_root_is_read(
        tmp_path, capsys, monkeypatch):
    """(Faked: the tests may run as root, who writes anywhere.)"""
    import ppairs_lens.io.atomic

    class Loaded(Exception):
        pass

    def stop(*a, **k):
        raise Loaded

    monkeypatch.setattr(ppairs_lens.models.loading, "load_model", stop)
    stores = tmp_path / "stores"
    stores.mkdir()
    locked = {tmp_path, stores}
    monkeypatch.setattr(ppairs_lens.io.atomic.os, "access", lambda p, mode: p not in locked)
    err = refused(["sweep", "--datasets", "larger_number", "--out", str(tmp_path / "o")], capsys)
    assert f"--out {tmp_path / 'o'}: {tmp_path} is not writable" in err
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(Loaded):  # finished stores in a read-only root are only read
        main(["sweep", "--datasets", "larger_number", "--out", str(out), "--stores",
              str(stores)])


def test_max_pairs_the_seed_files_would_ignore_is_refused(no_model, tmp_path, capsys):
    data = tmp_path / "shared"
    (data / "mctaco").mkdir(parents=True)
    (data / "mctaco" / "dev_3783.tsv").write_text("")
    err = refused(["run", "--shared-data", str(data), "--max-pairs", "30",
                   "--out", str(tmp_path / "o")], capsys)
    assert "--max-pairs sizes the built-ins or --datasets files" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("limits, message", [
    (["30", "40"], "one limit for every dataset at most, got 30 40"),
    (["=3"], "expected N or NAME=N"),
    (["Alpha=0"], "must be at least 1"),
    (["Alpha=3", "Alpha=4"], "a pair limit is given twice for Alpha"),
    (["Beta=3"], "--max-pairs Beta=3: no dataset here is named 'Beta'"),
    # a limited dataset's own name is no name a limit is looked up by (it would be ignored)
    (["10", "alphabetical-n10s0=5"], "no dataset here is named 'alphabetical-n10s0'"),
])
def test_bad_pair_limits_are_named(no_model, tmp_path, capsys, limits, message):
    err = refused(["sweep", "--datasets", "alphabetical@Alpha", "--out", str(tmp_path / "o"),
                   "--max-pairs", *limits], capsys)
    assert message in err


def test_run_takes_one_pair_limit(no_model, tmp_path, capsys):
    err = refused(["run", "--builtins", "--max-pairs", "larger_number=30",
                   "--out", str(tmp_path / "o")], capsys)
    assert "run takes one --max-pairs for every dataset" in err
