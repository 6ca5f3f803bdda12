"""The notebooks in notebooks/: committed stripped, and each runs top to bottom.

The run tests execute every notebook with nbclient on the embedded model, with the notebook's
``parameters`` cell extended by small settings (few pairs, few bootstrap resamples, a tmp
output folder). All notebooks share one tmp stores folder, so a dataset harvested by one
notebook is reused by the next. The kernel is a kernelspec written into a tmp folder on
``JUPYTER_PATH`` that points at this interpreter (``sys.executable``), so the notebooks run
in the same environment as the tests, whatever kernels the user has installed.
"""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
KERNEL = "ppairs-lens-tests"
CELL_TIMEOUT = 900  # seconds per cell: generous, the machine may be shared

#: Small settings per notebook (merged into its parameters cell) and the files it must write.
#: N_PAIRS and SEED are the same everywhere so the notebooks share stores.
SMALL: dict[str, tuple[dict, list[str]]] = {
    "quickstart.ipynb": (
        {"DATASET": "larger_number", "N_PAIRS": 40},
        ["quickstart_sweep.png"]),
    "layer_sweep.ipynb": (
        {"DATASETS": ["larger_number", "capital_true"], "N_PAIRS": 40, "N_BOOT": 30,
         "JUDGES": True, "FEW_SHOT_K": 2},
        ["layer_sweep.png", "layer_sweep.csv", "layer_sweep_summary.json"]),
    "transfer_and_cosine.ipynb": (
        {"DATASETS": ["larger_number", "capital_true", "alphabetical"], "N_PAIRS": 40,
         "N_BOOT": 30, "N_RANDOM": 500},
        ["transfer.png", "cosine_distribution.png", "transfer_summary.json"]),
    "ablation.ipynb": (
        {"DATASET": "larger_number", "N_PAIRS": 40, "MAX_EVAL_PAIRS": 12, "N_RANDOM": 8,
         "N_MATCHED": 8, "PRESETS": ("paper",), "REFIT": False, "N_BOOT": 30},
        ["ablation.png", "ablation.csv", "ablation_null.csv"]),
    "ranking.ipynb": (
        {"DATASET": "story_sentiment", "N_TRAIN_CONTEXTS": 2, "MAX_TRAIN_PAIRS_PER_CONTEXT": 6,
         "N_EVAL_CONTEXTS": 2, "METHODS": ("probe_greedy", "zero_shot_greedy", "length",
                                           "memorised"), "N_BOOT": 50, "CLIMATEX": None},
        ["ranking.png", "ranking.csv"]),
    "steering_generate.ipynb": (
        {"DATASET": "larger_number", "N_PAIRS": 40, "N_BOOT": 30,
         "PROMPTS": ["My favourite number is"], "ALPHAS": [-1.0, 1.0], "MAX_NEW_TOKENS": 8},
        ["steering_generate.txt"]),
}
for _params, _ in SMALL.values():
    _params.setdefault("SEED", 0)

ALL = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))


def _read(name: str):
    return nbformat.read(NOTEBOOKS / name, as_version=4)


def _parameters_cell(nb):
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, "a notebook needs exactly one cell tagged 'parameters'"
    return cells[0]


def _assigned_names(source: str) -> set[str]:
    return {t.id for node in ast.parse(source).body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name)}


# --------------------------------------------------------------------------------------------
# Fast: committed form
# --------------------------------------------------------------------------------------------

def test_every_notebook_is_tested():
    assert ALL, "no notebooks found"
    assert sorted(SMALL) == ALL, "each notebook needs small settings in SMALL (and vice versa)"


@pytest.mark.parametrize("name", ALL)
def test_notebook_committed_stripped(name):
    """No outputs, no execution counts (run `python notebooks/strip_outputs.py`), and a
    parameters cell whose names cover the small settings the run test injects."""
    nb = _read(name)
    nbformat.validate(nb)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
             and (c.outputs or c.execution_count is not None)]
    assert not dirty, (f"{name}: cells {dirty} have outputs or execution counts; run "
                       "python notebooks/strip_outputs.py")
    assert "widgets" not in nb.metadata
    params = _parameters_cell(nb)
    names = _assigned_names(params.source)
    missing = set(SMALL.get(name, ({}, []))[0]) - names
    assert not missing, f"{name}: parameters cell does not define {sorted(missing)}"
    assert {"OUT"} <= names, f"{name}: outputs must go to a folder given by a parameter (OUT)"
    for i, c in enumerate(nb.cells):  # every code cell is Python (IPython magics aside)
        if c.cell_type == "code":
            src = "\n".join(line for line in c.source.splitlines()
                            if not line.lstrip().startswith(("%", "!")))
            try:
                ast.parse(src)
            except SyntaxError as e:
                pytest.fail(f"{name}: cell {i} is not valid Python: {e}")


# --------------------------------------------------------------------------------------------
# Slow: run each notebook on the embedded model
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory):
    """A kernelspec for this interpreter, found first on JUPYTER_PATH."""
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "ppairs-lens tests", "language": "python",
    }))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JUPYTER_PATH", os.pathsep.join(
            [str(root), *filter(None, os.environ.get("JUPYTER_PATH", "").split(os.pathsep))]))
        yield KERNEL


@pytest.fixture(scope="module")
def shared_stores(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("stores")


def _inject(nb, params: dict) -> None:
    """Append ``params`` (as Python assignments) to the notebook's parameters cell."""
    cell = _parameters_cell(nb)
    lines = [f"{k} = {v!r}" for k, v in params.items()]
    cell.source = cell.source.rstrip() + "\n\n# --- injected by tests/test_notebooks.py ---\n" \
        + "\n".join(lines) + "\n"


@pytest.mark.integration
@pytest.mark.parametrize("name", [n for n in SMALL if n in ALL])
def test_notebook_runs(name, kernel_name, shared_stores, tmp_path):
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    params, expected = SMALL[name]
    out = tmp_path / "out"
    nb = _read(name)
    _inject(nb, {**params, "OUT": str(out), **({"STORES": str(shared_stores)}
                                                if "STORES" in _assigned_names(
                                                    _parameters_cell(nb).source) else {})})
    # Last cell: report the interpreter, so the test can check the kernel is this venv's.
    nb.cells.append(nbformat.v4.new_code_cell("import sys; print(sys.prefix)"))
    client = NotebookClient(nb, kernel_name=kernel_name, timeout=CELL_TIMEOUT,
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    try:
        client.execute()
    except CellExecutionError as e:
        pytest.fail(f"{name} failed:\n{e}", pytrace=False)
    finally:  # the executed notebook, outputs and all, for a look after a failure
        nbformat.write(nb, tmp_path / name)
    printed = "".join(o.get("text", "") for o in nb.cells[-1].outputs).strip()
    assert printed == sys.prefix, \
        f"{name} ran in the environment {printed!r}, not in this one ({sys.prefix!r})"
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
    missing = [f for f in expected if not (out / f).is_file()]
    assert not missing, f"{name} did not write {missing} into OUT"
