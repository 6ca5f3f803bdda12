"""Strip outputs and execution counts from notebooks before committing them.

    python notebooks/strip_outputs.py            # every notebooks/*.ipynb
    python notebooks/strip_outputs.py A.ipynb …  # the given files
    python notebooks/strip_outputs.py --check    # exit 1 if any notebook still has outputs

Only outputs, execution counts and per-run metadata (execution timings, widget state) are
removed; cell sources, ids and tags (the ``parameters`` tag) are kept.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
#: Cell metadata written by a run, not by the author.
RUN_CELL_METADATA = ("execution", "collapsed", "scrolled", "ExecuteTime")
RUN_NB_METADATA = ("widgets", "papermill")


def strip(nb: nbformat.NotebookNode) -> bool:
    """Strip ``nb`` in place; True when anything changed."""
    changed = False
    for cell in nb.cells:
        for key in RUN_CELL_METADATA:
            if key in cell.metadata:
                del cell.metadata[key]
                changed = True
        if cell.cell_type != "code":
            continue
        if cell.outputs or cell.execution_count is not None:
            cell.outputs = []
            cell.execution_count = None
            changed = True
    for key in RUN_NB_METADATA:
        if key in nb.metadata:
            del nb.metadata[key]
            changed = True
    return changed


def is_stripped(nb: nbformat.NotebookNode) -> bool:
    return not any(c.cell_type == "code" and (c.outputs or c.execution_count is not None)
                   for c in nb.cells)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    paths = [Path(a) for a in args if a != "--check"] or sorted(HERE.glob("*.ipynb"))
    dirty = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        if check:
            if not is_stripped(nb):
                dirty.append(path)
        elif strip(nb):
            nbformat.write(nb, path)
            print(f"stripped {path}")
    for path in dirty:
        print(f"{path} has outputs or execution counts: run python notebooks/strip_outputs.py",
              file=sys.stderr)
    return 1 if dirty else 0


if __name__ == "__main__":
    raise SystemExit(main())
