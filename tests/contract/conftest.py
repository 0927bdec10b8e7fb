"""The provider contract suite runs once per target. A target is a module
`tests/contract/target_<provider>.py` with `make_target(request, tmp_path)`: a context
manager yielding a dict with `provider` (an instance), `cluster_spec(trial, nodes, **fields)`
(a ClusterSpec whose nodes start fast) and `wait_s` (how long state changes may take).
A cloud provider joins the suite by adding its own target module."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from cloud.provider import ClusterSpec, Provider

TARGETS = {p.stem.removeprefix("target_"): p
           for p in sorted(Path(__file__).parent.glob("target_*.py"))}


@dataclass
class ContractTarget:
    provider: Provider
    cluster_spec: Callable[..., ClusterSpec]
    wait_s: float


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"contract_target_{name}", TARGETS[name])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(params=sorted(TARGETS))
def target(request, tmp_path):
    with _load(request.param).make_target(request, tmp_path) as fields:
        yield ContractTarget(**fields)
