"""Every cluster the advisor could recommend: catalog offering x node count x market, as numpy
columns, after the user's filters and the GPU-memory check."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from advisor.errors import ParameterError
from advisor.reasons import Cut, Reason
from advisor.workload import GIB, Workload
from gpuadvisor.gpus import gpu_matches

# Columns of Catalog.as_arrays() carried onto every candidate.
OFFERING_COLUMNS = (
    "provider", "region", "instance_type", "gpu_type", "gpus_per_node", "network_gbps",
    "interconnect",
)


FILTER_REASONS = {"provider": Reason.PROVIDER_FILTER, "region": Reason.REGION_FILTER,
                  "GPU": Reason.GPU_FILTER}


class CandidateError(ParameterError):
    """A filter names something the catalog does not hold; the message lists what it does."""


@dataclass(frozen=True)
class Filters:
    providers: Sequence[str] = ()
    regions: Sequence[str] = ()
    gpus: Sequence[str] = ()
    max_nodes: int = 8


@dataclass
class Candidates:
    """Equal-length columns, one row per (offering, nodes, market)."""

    columns: dict[str, np.ndarray]
    dropped: Counter = field(default_factory=Counter)  # Cut -> candidates dropped
    largest_gpu_gb: float | None = None  # most GPU memory among offerings the filters kept

    def __len__(self) -> int:
        return len(self.columns["nodes"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def take(self, index: np.ndarray) -> Candidates:
        return Candidates({k: v[index] for k, v in self.columns.items()}, self.dropped,
                          self.largest_gpu_gb)

    def features(self, workload: Workload) -> dict[str, np.ndarray]:
        """The feature columns Artifact.predict expects, built by the one feature builder
        that fit and evaluate use too."""
        from advisor.features import configuration_features

        n = len(self)
        c = self.columns
        configs = {
            "model": np.full(n, workload.model), "gpu": c["gpu_type"],
            "provider": c["provider"], "sync": np.full(n, "allreduce"),
            "ps_count": np.zeros(n), "precision": np.full(n, workload.precision),
            "nodes": c["nodes"], "gpus_per_node": c["gpus_per_node"],
            "batch_per_gpu": np.full(n, workload.batch_per_gpu), "spot": c["spot"],
            "network_gbps": c["network_gbps"], "interconnect": c["interconnect"],
        }
        return configuration_features(configs, {workload.model: workload.model_features()})

    def spot_markets(self) -> list[tuple[str, str, str]]:
        """The (provider, GPU, region) spot markets among the candidates, each once."""
        spot = self.columns["spot"]
        return sorted(set(zip(*(self.columns[c][spot].tolist()
                                for c in ("provider", "gpu_type", "region")))))


def enumerate_candidates(
    offerings: Mapping[str, np.ndarray],
    workload: Workload,
    filters: Filters,
    gpu_spec: Callable | None = None,
) -> Candidates:
    """All candidates for `workload`; raises CandidateError on a filter naming nothing."""
    if gpu_spec is None:
        from cloud.gpus import gpu_spec
    provider = np.asarray(offerings["provider"]).astype(str)
    region = np.asarray(offerings["region"]).astype(str)
    gpu = np.asarray(offerings["gpu_type"]).astype(str)
    if filters.max_nodes < 1:
        raise CandidateError(f"max_nodes must be at least 1, got {filters.max_nodes}",
                             "max_nodes")

    price_on_demand = np.asarray(offerings["price_on_demand"], dtype=float)
    price_spot = np.asarray(offerings["price_spot"], dtype=float)  # NaN where no spot market
    # Rows each offering expands to: every node count, on-demand and (where priced) spot.
    rows_per_offering = filters.max_nodes * (1 + np.isfinite(price_spot))
    keep = np.ones(len(provider), dtype=bool)
    reasons: Counter = Counter()
    for label, parameter, wanted, values in (
            ("provider", "providers", filters.providers, provider),
            ("region", "regions", filters.regions, region),
            ("GPU", "gpus", filters.gpus, gpu)):
        if not wanted:
            continue
        known = sorted(set(values))
        # A GPU filter takes what people type (gpuadvisor.gpus): "A100" is every A100.
        matches = {w: gpu_matches(w, known) if label == "GPU"
                   else tuple(k for k in known if k.lower() == w.lower()) for w in wanted}
        unknown = sorted(w for w, names in matches.items() if not names)
        if unknown:
            raise CandidateError(
                f"unknown {label} {', '.join(unknown)}; the catalog has: {', '.join(known)}",
                parameter)
        match = np.isin(values, [name for names in matches.values() for name in names])
        reasons[Cut(FILTER_REASONS[label])] += int(rows_per_offering[keep & ~match].sum())
        keep &= match

    specs = {name: gpu_spec(name) for name in sorted(set(gpu))}
    if workload.precision == "bf16":
        keep = _cut_without_bf16(keep, gpu, specs, filters, reasons, rows_per_offering)
    memory_gb = np.array([specs[g].memory_gb for g in gpu], dtype=float)
    fits = workload.memory_per_gpu_bytes() <= memory_gb * GIB
    need = workload.memory_per_gpu_bytes() / GIB
    for g in sorted(set(gpu[keep & ~fits])):
        cut = Cut(Reason.MEMORY, gpu=g, need_gib=round(need, 1),
                  gpu_memory_gb=specs[g].memory_gb)
        reasons[cut] += int(rows_per_offering[keep & ~fits & (gpu == g)].sum())
    largest = float(memory_gb[keep].max()) if keep.any() else None
    keep &= fits

    rows = []
    for spot, price in ((False, price_on_demand), (True, price_spot)):
        priced = keep & np.isfinite(price)
        index = np.repeat(np.flatnonzero(priced), filters.max_nodes)
        nodes = np.tile(np.arange(1, filters.max_nodes + 1), int(priced.sum()))
        rows.append((index, nodes, np.full(len(index), spot), price[index]))

    index, nodes, spot, price = (np.concatenate(parts) for parts in zip(*rows))
    columns = {name: np.asarray(offerings[name])[index] for name in OFFERING_COLUMNS}
    columns["provider"], columns["region"] = provider[index], region[index]
    columns["gpu_type"] = gpu[index]
    columns.update(offering=index, nodes=nodes, spot=spot, price_per_node_hour=price)
    return Candidates(columns, +reasons, largest)


def _cut_without_bf16(keep, gpu, specs, filters, reasons, rows_per_offering) -> np.ndarray:
    """`keep` without GPUs that have no bf16 (each cut with its reason); a GPU filter that
    leaves only such GPUs is an error naming the fix, not an empty ranking."""
    from advisor.features import no_bf16_message

    lacking = np.array([specs[g].bf16 is False for g in gpu], dtype=bool)
    if filters.gpus and keep.any() and lacking[keep].all():
        raise CandidateError(no_bf16_message(", ".join(sorted(set(gpu[keep])))), "precision")
    for g in sorted(set(gpu[keep & lacking])):
        reasons[Cut(Reason.PRECISION, gpu=g)] += int(rows_per_offering[keep & (gpu == g)].sum())
    return keep & ~lacking
