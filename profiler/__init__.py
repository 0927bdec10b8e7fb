"""Measurement half of the product: model zoo and cards, training worker, sweeps, store."""
