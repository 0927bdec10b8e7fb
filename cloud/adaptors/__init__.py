"""One adaptor per cloud SDK, in the manner of SkyPilot's `sky/adaptors`: `gcp.py` for the
google-cloud libraries, `aws.py` for boto3. They are the only modules that import an SDK, and
each holds, once: the lazy import with the hint of which extra to install, the translation of
the SDK's errors into ProviderError (SinkError for a results bucket) in one line that names
the fix, and the clients or calls the rest of the cloud room uses. Importing an adaptor
imports no SDK, so `advisor recommend` and a dry run never pay for one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType

from cloud.provider import ProviderError


def install_hint(extra: str) -> str:
    return f"pip install 'gpu-advisor[{extra}]'"


def load(module: str, extra: str) -> ModuleType:
    """The SDK module, imported on first use; without it, the extra that brings it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ProviderError(f"{module} is not installed; {install_hint(extra)}") from None


@contextmanager
def translated(sdk_errors: Callable[[], tuple[type[Exception], ...]],
               translate: Callable[..., ProviderError], what: str, **context) -> Iterator[None]:
    """Raise `translate(exc, what, **context)` for an error of the SDK (one of `sdk_errors()`,
    imported only once an error is raised) that the block inside raised."""
    try:
        yield
    except ProviderError:
        raise
    except Exception as exc:
        if not isinstance(exc, sdk_errors()):
            raise
        raise translate(exc, what, **context) from None
