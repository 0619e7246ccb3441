"""Across runs and models: comparison, heterogeneity, phases, the verdict and the global share."""
