"""``python -m analyses.replication [FIGURES]``: re-decide the claims of a finished run's
folder (:func:`analyses.replication.run.refresh`), one line on bad input."""

from __future__ import annotations

import argparse

from analyses.replication.run import refresh
from ppairs_lens.errors import PPairsError

ap = argparse.ArgumentParser(prog="python -m analyses.replication", description=refresh.__doc__)
ap.add_argument("figures", nargs="?", default="figures")
fig_arg = ap.parse_args().figures
# A folder the run did not write, or wrote at another version, is the user's to fix: one
# line naming the file or field, never a traceback.
try:
    refresh(fig_arg)
except PPairsError as e:
    ap.exit(2, f"{ap.prog}: error: {' '.join(str(e).split())}\n")
except OSError as e:
    ap.exit(2, f"{ap.prog}: error: {e.filename} cannot be read: {e.strerror}\n")
except KeyError as e:
    ap.exit(2, f"{ap.prog}: error: the outputs in {fig_arg} lack the field {e}: they were "
               "written by another version; rerun it (make demo)\n")
