"""Writing results: atomic files, configs and tables, figures, and the step cache."""
