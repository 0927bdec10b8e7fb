"""Provider name -> class. Classes are imported only when asked for, so naming a provider
never pulls in another provider's SDK."""

from __future__ import annotations

import difflib
import importlib
from typing import Any

from cloud.provider import Provider, ProviderError

# name -> "module:Class"
PROVIDERS: dict[str, str] = {
    "local": "cloud.local:LocalProvider",
    "gcp": "cloud.gcp:GcpProvider",
    "aws": "cloud.aws:AwsProvider",
}


def provider_class(name: str) -> type[Provider]:
    """The class registered under `name`; ProviderError names the closest known name."""
    if name not in PROVIDERS:
        close = difflib.get_close_matches(name, PROVIDERS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ProviderError(f"unknown provider {name!r}; {hint}known: {', '.join(PROVIDERS)}")
    module_name, class_name = PROVIDERS[name].split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise ProviderError(f"the {name} provider is not part of this installation") from None
        raise ProviderError(
            f"the {name} provider needs {exc.name!r}; install it with "
            f"pip install 'gpu-advisor[{name}]'"
        ) from None
    return getattr(module, class_name)


def make_provider(name: str, **kwargs: Any) -> Provider:
    """An instance of the named provider; its constructor creates any SDK clients it needs."""
    return provider_class(name)(**kwargs)
