"""The sweep spec (YAML) and its expansion into a grid of trials.

A spec names the models, cluster sizes, instance types, batch sizes and precisions to
measure; every list expands into the grid, and each trial gets a stable key (a hash of its
parameters) so that re-running the same spec skips the trials already finished.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
import os
import random
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cloud.registry import PROVIDERS
from gpuadvisor.errors import GpuAdvisorError
from gpuadvisor.textfile import unreadable
from gpuadvisor.vocab import check_precision
from profiler.limits import MAX_CLOUD_NODES, MAX_TRIALS

SINK_SCHEMES = ("file://", "gs://", "s3://")
LOCAL_INSTANCE_TYPE = "local-cpu"
MAX_LIST_VALUE = 1 << 20  # nodes and batch sizes: beyond any cluster or memory


class SpecError(GpuAdvisorError, ValueError):
    """A spec that cannot be used; one line per problem, each naming the field and the fix."""

    exit_code = 2


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LifetimeDistribution(_Strict):
    """A node's lifetime drawn from a distribution, as a spot market would end it."""

    distribution: Literal["exponential", "weibull"]
    mean_seconds: float = Field(gt=0, allow_inf_nan=False)
    # Weibull shape; 1 is the exponential
    shape: float = Field(default=1.0, gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _exponential_has_shape_one(self) -> LifetimeDistribution:
        if self.distribution == "exponential" and self.shape != 1.0:
            raise ValueError("an exponential lifetime has shape 1; use distribution: weibull")
        return self

    def sample(self, rng: random.Random) -> float:
        scale = self.mean_seconds / math.gamma(1.0 + 1.0 / self.shape)
        return rng.weibullvariate(scale, self.shape)


class Revocation(_Strict):
    """Which node to revoke and when, in seconds after the cluster's first training step."""

    node: int = Field(ge=0, description="node index; losing node 0, the rendezvous host, "
                      "restarts the whole job from the newest checkpoint")
    at_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    lifetime: LifetimeDistribution | None = None
    seed: int = 0

    @model_validator(mode="after")
    def _one_time_source(self) -> Revocation:
        if (self.at_seconds is None) == (self.lifetime is None):
            raise ValueError("give exactly one of at_seconds or lifetime")
        return self


# Lists a spec may give as one value (`models: resnet50`).
SCALAR_OR_LIST = ("models", "nodes", "batch_per_gpu", "precision", "zones", "instance_types")


class SweepSpec(_Strict):
    name: str
    provider: str = "local"
    models: list[str] = Field(min_length=1)
    nodes: list[int] = Field(default=[1], min_length=1)
    batch_per_gpu: list[int] = Field(default=[32], min_length=1)  # per worker process
    precision: list[str] = Field(default=["fp32"], min_length=1)  # gpuadvisor.vocab.PRECISIONS
    image_size: int | None = Field(default=None, ge=8, le=8192)
    seq_len: int | None = Field(default=None, ge=8, le=1 << 20)
    # measuring time limit per trial
    max_seconds: float = Field(default=120, gt=0, allow_inf_nan=False)
    tolerance: float = Field(default=0.05, gt=0, lt=1)  # 95% interval half-width / mean
    checkpoint_every: int | None = Field(default=None, ge=1, le=10**9)  # steps
    revocation: Revocation | None = None
    region: str | None = None
    zones: list[str] = []
    instance_types: list[str] = []
    # picks the accelerator where a host takes several (GCP N1); any name gpuadvisor.gpus takes
    gpu_type: str | None = None
    # the largest hosts carry 16 GPUs (a2-megagpu-16g); more processes would share them.
    # Unset on a cloud: what the catalog says the instance type comes with (`gpus_on`)
    gpus_per_node: int = Field(default=0, ge=0, le=16)
    # worker processes per node; default: one per GPU, else one
    nproc_per_node: int | None = Field(default=None, ge=1, le=64)
    spot: bool = False
    # s a node may take to train
    startup_timeout: float = Field(default=300, gt=0, allow_inf_nan=False)
    results: str | None = None  # sink URL for the records
    # USD for the whole sweep
    max_cost: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    price_per_hour: float | None = Field(
        default=None, ge=0, allow_inf_nan=False,
        description="USD per node-hour, for an offering the catalog lacks (else the catalog's "
                    "price is used); --max-cost is never checked against an unknown price")
    image: str | None = None

    @field_validator(*SCALAR_OR_LIST, mode="before")
    @classmethod
    def _scalar_to_list(cls, value: Any) -> Any:
        return value if isinstance(value, list) else [value]

    @field_validator("name")
    @classmethod
    def _label_safe(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,39}", value):
            raise ValueError("use 1-40 lowercase letters, digits, '-' or '_' (it labels cloud VMs)")
        return value

    @field_validator("nodes", "batch_per_gpu")
    @classmethod
    def _positive(cls, values: list[int]) -> list[int]:
        if any(v < 1 for v in values):
            raise ValueError("every value must be 1 or more")
        if any(v > MAX_LIST_VALUE for v in values):
            raise ValueError(f"every value must be at most {MAX_LIST_VALUE:,}")
        return values

    @field_validator("precision")
    @classmethod
    def _known_precisions(cls, values: list[str]) -> list[str]:
        return [check_precision(value) for value in values]

    @field_validator("gpu_type")
    @classmethod
    def _canonical_gpu(cls, value: str | None) -> str | None:
        from cloud.gpus import gpu_spec

        try:
            return None if value is None else gpu_spec(value).gpu
        except KeyError as error:
            raise ValueError(error.args[0]) from None

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str) -> str:
        if value not in PROVIDERS:
            raise ValueError(f"unknown provider {value!r}; allowed: {', '.join(PROVIDERS)}")
        return value

    @field_validator("results")
    @classmethod
    def _sink_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(SINK_SCHEMES):
            raise ValueError(f"a sink URL starts with {', '.join(SINK_SCHEMES)}")
        return value

    @model_validator(mode="after")
    def _cloud_needs_instance_types(self) -> SweepSpec:
        if self.provider != "local" and not self.instance_types:
            raise ValueError(f"the {self.provider} provider needs instance_types: [...]")
        cloud_types = set(self.instance_types) - {LOCAL_INSTANCE_TYPE}
        if self.provider == "local" and cloud_types:
            raise ValueError(
                f"the local provider runs on this machine, so its runs cannot be labelled "
                f"{', '.join(sorted(cloud_types))}; drop instance_types (or give "
                f"[{LOCAL_INSTANCE_TYPE}]), or set provider: gcp or aws")
        if self.provider == "local" and self.gpu_type:
            raise ValueError(f"the local provider measures this machine's own GPUs (or its "
                             f"CPU), so its runs cannot be labelled gpu_type {self.gpu_type}; "
                             "drop gpu_type, or set provider: gcp or aws")
        for instance_type in self.instance_types or [LOCAL_INSTANCE_TYPE]:
            gpus = self.gpus_on(instance_type)
            if gpus and (self.nproc_per_node or 0) > gpus:
                where = "gpus_per_node" if self.gpus_per_node else f"{instance_type} has"
                raise ValueError(f"nproc_per_node {self.nproc_per_node} is more than {where} "
                                 f"{gpus}: a worker takes a GPU of its own under NCCL; "
                                 "drop nproc_per_node (it defaults to one per GPU)")
        if self.provider == "local" and self.spot:
            raise ValueError("the local provider has no spot market; drop spot: true, or "
                             "revoke nodes with revocation: {...}")
        at = self.revocation.at_seconds if self.revocation else None
        if at is not None and at >= self.max_seconds:
            raise ValueError(f"revocation.at_seconds {at:g} must be below max_seconds "
                             f"{self.max_seconds:g}, the measurement's length; raise "
                             "max_seconds or revoke sooner")
        if self.revocation and self.revocation.node >= max(self.nodes):
            raise ValueError(
                f"revocation.node {self.revocation.node} does not exist in clusters of at most "
                f"{max(self.nodes)} nodes (nodes are numbered from 0)"
            )
        return self

    def gpus_on(self, instance_type: str) -> int:
        """GPUs a node of this instance type has: gpus_per_node; else, on a cloud, what the
        catalog says the type always comes with (8 on a p4d.24xlarge), so that such a node
        trains on all of them; else none."""
        if self.gpus_per_node or self.provider == "local":
            return self.gpus_per_node
        from cloud.catalog import fixed_gpus

        return fixed_gpus(self.provider, instance_type) or 0

    def workers_for(self, gpus: int) -> int:
        """Worker processes a node with `gpus` GPUs runs: nproc_per_node, else one per GPU,
        else one."""
        return self.nproc_per_node or gpus or 1

    def trials(self) -> list[Trial]:
        """The grid: one trial per combination of the spec's lists, in a stable order."""
        instance_types = self.instance_types or [LOCAL_INSTANCE_TYPE]
        grid = itertools.product(
            self.models, self.nodes, instance_types, self.batch_per_gpu, self.precision
        )
        return [self._trial(*combo) for combo in grid]

    def _trial(self, model: str, nodes: int, instance_type: str, batch: int,
               precision: str) -> Trial:
        gpus = self.gpus_on(instance_type)
        params = {
            "provider": self.provider, "region": self.region, "instance_type": instance_type,
            # the spec's own gpus_per_node: a one-GPU type's trials keep their keys
            "gpu_type": self.gpu_type, "gpus_per_node": self.gpus_per_node,
            "nproc_per_node": self.workers_for(gpus),
            "spot": self.spot, "nodes": nodes, "model": model, "batch_per_gpu": batch,
            "precision": precision, "image_size": self.image_size, "seq_len": self.seq_len,
            "max_seconds": self.max_seconds, "tolerance": self.tolerance,
            "checkpoint_every": self.checkpoint_every,
        }
        revocation = self.revocation if self.revocation and self.revocation.node < nodes else None
        if revocation:
            params["revocation"] = revocation.model_dump()
        key = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]
        revoke_at = None
        if revocation:
            revoke_at = revocation.at_seconds or revocation.lifetime.sample(
                random.Random(f"{revocation.seed}:{key}")
            )
            if revoke_at >= self.max_seconds:  # the node outlives the measurement
                revocation = revoke_at = None
        return Trial(
            sweep=self.name, key=key, model=model, nodes=nodes, instance_type=instance_type,
            batch_per_gpu=batch, precision=precision, image_size=self.image_size,
            seq_len=self.seq_len, gpu_type=self.gpu_type,
            gpus_per_node=gpus, nproc_per_node=self.workers_for(gpus), spot=self.spot,
            region=self.region,
            zones=tuple(self.zones), max_seconds=self.max_seconds, tolerance=self.tolerance,
            checkpoint_every=self.checkpoint_every, startup_timeout=self.startup_timeout,
            image=self.image, revoke_node=revocation.node if revocation else None,
            revoke_at=revoke_at, price_per_hour=self.price_per_hour,
        )


@dataclass(frozen=True)
class Trial:
    """One cell of the grid: a cluster shape and a workload, measured once."""

    sweep: str
    key: str
    model: str
    nodes: int
    instance_type: str
    batch_per_gpu: int
    precision: str
    image_size: int | None
    seq_len: int | None
    gpu_type: str | None
    gpus_per_node: int
    nproc_per_node: int
    spot: bool
    region: str | None
    zones: tuple[str, ...]
    max_seconds: float
    tolerance: float
    checkpoint_every: int | None
    startup_timeout: float
    image: str | None
    revoke_node: int | None  # None: no revocation in this trial
    revoke_at: float | None  # seconds after the cluster's first step
    price_per_hour: float | None = None  # the spec's USD per node-hour; None: the catalog's

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_size(spec: SweepSpec, max_trials: int | None = None,
               max_nodes: int | None = None) -> None:
    """Refuse a grid of more than `max_trials` trials (default MAX_TRIALS) or a cluster of more
    than `max_nodes` nodes (default MAX_CLOUD_NODES on a cloud, the core count locally),
    before the grid is expanded."""
    trials = math.prod(len(values) for values in (
        spec.models, spec.nodes, spec.instance_types or [LOCAL_INSTANCE_TYPE],
        spec.batch_per_gpu, spec.precision))
    max_trials = MAX_TRIALS if max_trials is None else max_trials
    if trials > max_trials:
        raise SpecError(f"the spec's grid has {trials:,} trials, more than max_trials "
                        f"{max_trials:,}; shorten its lists, or raise max_trials", "max_trials")
    if max_nodes is None:
        max_nodes = max(2, os.cpu_count() or 2) if spec.provider == "local" else MAX_CLOUD_NODES
    if max(spec.nodes) > max_nodes:
        where = "this machine" if spec.provider == "local" else spec.provider
        raise SpecError(f"the spec asks for {max(spec.nodes):,} nodes, more than max_nodes "
                        f"{max_nodes} on {where}; give smaller nodes: [...], or raise max_nodes",
                        "max_nodes")


def spec_schema() -> dict[str, Any]:
    """JSON Schema of a sweep spec (docs/schemas/sweep_spec.json): the models' own, with the
    lists that also take one value saying so."""
    schema = SweepSpec.model_json_schema()
    for name in SCALAR_OR_LIST:
        field = schema["properties"][name]
        listed = {key: field.pop(key) for key in ("type", "items", "minItems") if key in field}
        field["anyOf"] = [listed["items"], listed]
    return schema


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None) -> SweepSpec:
    """Read and validate a spec file; `overrides` (from flags) replace its keys."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SpecError(f"{path}: no such spec file; see specs/smoke.yaml for an example") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"spec {unreadable(path, exc)}") from None
    return spec_from_yaml(text, str(path), overrides)


def spec_from_yaml(text: str, source: str = "spec",
                   overrides: dict[str, Any] | None = None) -> SweepSpec:
    """Validate a spec given as YAML text; `overrides` replace its keys."""
    import yaml

    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise SpecError(f"{source} is not valid YAML{where}; fix the syntax") from None
    if not isinstance(raw, dict):
        raise SpecError(f"{source}: a spec is a YAML mapping (name: ..., models: [...], ...)")
    raw.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return parse_spec(raw, source=source)


def parse_spec(raw: dict[str, Any], source: str = "spec") -> SweepSpec:
    try:
        spec = SweepSpec.model_validate(raw)
    except ValidationError as exc:
        raise SpecError("\n".join(_problem(source, err) for err in exc.errors())) from None
    problems = [f"{source}: models: {problem}" for problem in _unknown_models(spec.models)]
    if problems:
        raise SpecError("\n".join(problems))
    return spec


def _problem(source: str, err: dict[str, Any]) -> str:
    loc = ".".join(str(part) for part in err["loc"])
    if err["type"] == "extra_forbidden":
        parent, key = err["loc"][:-1], str(err["loc"][-1])
        allowed = _fields_at(parent)
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.5)
        hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(allowed)}"
        return f"{source}: unknown key {loc!r}; {hint}"
    message = err["msg"].removeprefix("Value error, ")
    return f"{source}: {loc or 'spec'}: {message}"


def _fields_at(loc: tuple) -> list[str]:
    model: type[BaseModel] = SweepSpec
    for part in loc:
        annotation = model.model_fields[str(part)].annotation
        model = next(a for a in getattr(annotation, "__args__", (annotation,))
                     if isinstance(a, type) and issubclass(a, BaseModel))
    return list(model.model_fields)


def _unknown_models(names: list[str]) -> list[str]:
    """The zoo's message (with the closest names) for each model it does not know."""
    from profiler.zoo import UnknownModelError, resolve

    problems = []
    for name in names:
        try:
            resolve(name)
        except UnknownModelError as exc:
            problems.append(str(exc))
    return problems
