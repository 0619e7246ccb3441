"""Calibration: simulated studies, realistic and item-level curves, the method comparisons."""
