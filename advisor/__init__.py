"""Performance models, revocation-risk model, recommendation engine.

The Python API: `from advisor import recommend` (advisor.api), imported on first use so that
`import advisor` stays light."""

API = ("recommend", "Recommendation")
__all__ = list(API)


def __getattr__(name: str):
    if name in API:
        from advisor import api

        return getattr(api, name)
    raise AttributeError(f"module 'advisor' has no attribute {name!r}")
