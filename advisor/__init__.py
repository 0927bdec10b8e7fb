"""Performance models, revocation-risk model, recommendation engine.

The Python API: `from advisor import recommend, fit, evaluate` (advisor.api,
advisor.modelling), each imported on first use so that `import advisor` stays light."""

API = {"recommend": "api", "Recommendation": "api",
       "fit": "modelling", "FitResult": "modelling",
       "evaluate": "modelling", "Evaluation": "modelling"}
__all__ = list(API)


def __getattr__(name: str):
    if name in API:
        from importlib import import_module

        return getattr(import_module(f"advisor.{API[name]}"), name)
    raise AttributeError(f"module 'advisor' has no attribute {name!r}")
