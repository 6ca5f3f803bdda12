"""The replication of the seeds' experiments: the main job and everything only it needs.

It imports the plugin (``ppairs_lens``) and the experiments (``analyses``) and is imported by
neither. ``run`` runs the one config (``config``) on the seeds' datasets (``sets``; ``fetch``
and ``provenance``: where they come from) through the table steps (``steps``); its ``refresh``
re-decides a finished run's claims (``python -m analyses.replication FIGURES``); ``claims``
(with ``claim_families``, ``paper_claims``, ``study_claims``) is the registry of what the
seeds claim and its verdicts; ``findings`` the report
(``python -m analyses.replication.findings FIGURES REPORT.md``).
"""
