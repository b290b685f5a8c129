"""Across runs: the cross-run summary, the price of safety per cell, the results dataset."""
