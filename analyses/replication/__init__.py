"""The replication of the seeds' experiments: the main job and everything only it needs.

It imports the plugin (``ppairs_lens``) and the experiments (``analyses``) and is imported by
neither. ``run`` is the runner (``run_replication``; ``refresh`` re-decides a finished run's
claims, ``python -m analyses.replication FIGURES``), ``config`` its one config and presets,
``sets`` the seeds' datasets at its sizes, ``fetch`` and ``provenance`` where they come from,
``steps`` the table steps (each declares its record in its experiment's module), ``claims`` with ``claim_families``,
``paper_claims`` and ``study_claims`` the registry of what the seeds claim and its verdicts,
``findings`` the report (``python -m analyses.replication.findings FIGURES REPORT.md``).
"""
