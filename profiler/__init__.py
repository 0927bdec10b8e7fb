"""Measurement half of the product: model zoo and cards, training worker, sweeps, store.

The Python API: `from profiler import sweep, dry_run` (profiler.api), imported on first use
so that `import profiler` stays light."""

API = ("sweep", "dry_run", "SweepResult", "DryRun")
__all__ = list(API)


def __getattr__(name: str):
    if name in API:
        from profiler import api

        return getattr(api, name)
    raise AttributeError(f"module 'profiler' has no attribute {name!r}")
