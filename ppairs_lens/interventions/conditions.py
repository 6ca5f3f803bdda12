"""The condition names of an intervention study on a judge's answers (measured in log-odds
by :mod:`ppairs_lens.evaluation.null_test`)."""

from __future__ import annotations

from ppairs_lens.probes.estimators import PROBE_KINDS

__all__ = ["BASELINE", "CONDITION_ORDER", "CONTROL", "CONTROL_AT_READOUT", "MATCHED_NULL",
           "RANDOM_NULL"]

#: No intervention; the positive control (the choice tokens' unembedding difference removed);
#: the two nulls: isotropic random unit directions, and random directions drawn from the
#: training contrasts' covariance (variance-matched). A null's single directions are
#: ``random_XXX`` / ``matched_XXX``; the plain names are their summary rows.
BASELINE = "none"
CONTROL = "unembedding"
#: The same control removed only at the probes' read-out hook (not after the final norm, where
#: removing it forces the log-odds to 0 by construction): can that read-out move the judge?
CONTROL_AT_READOUT = "unembedding_at_readout"
RANDOM_NULL = "random"
MATCHED_NULL = "matched"
#: Order of conditions in tables and figures.
CONDITION_ORDER = (BASELINE, *PROBE_KINDS, RANDOM_NULL, MATCHED_NULL, CONTROL,
                   CONTROL_AT_READOUT)
