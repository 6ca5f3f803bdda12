"""Probes on contrast-pair activations: features, single-layer estimators, and the sweep over
every layer at once."""
