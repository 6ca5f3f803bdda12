"""Held-out evaluation: leak-aware splits and metrics with confidence intervals."""
