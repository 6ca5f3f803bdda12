"""Interventions on the residual stream through TransformerLens hooks: directional ablation."""
