"""Every cluster the advisor could recommend: catalog offering x node count x market x the
layouts that fit its GPUs' memory (advisor.layouts), as numpy columns, after the user's
filters."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from advisor.errors import ParameterError
from advisor.layouts import layouts
from advisor.reasons import Cut, Reason
from advisor.workload import Workload
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
    """Equal-length columns, one row per (offering, nodes, market, layout); `base` numbers
    the (offering, nodes, market) a row lays out."""

    columns: dict[str, np.ndarray]
    dropped: Counter = field(default_factory=Counter)  # Cut -> candidates dropped
    largest_gpu_mib: float | None = None  # most GPU memory among offerings the filters kept

    def __len__(self) -> int:
        return len(self.columns["nodes"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def take(self, index: np.ndarray) -> Candidates:
        return Candidates({k: v[index] for k, v in self.columns.items()}, self.dropped,
                          self.largest_gpu_mib)

    def fastest_layouts(self, throughput: np.ndarray) -> np.ndarray:
        """The rows to keep, one per (offering, nodes, market): the layout with the highest
        `throughput` (a prediction per row; NaN counts as the slowest)."""
        speed = np.nan_to_num(np.asarray(throughput, dtype=float), nan=-np.inf)
        order = np.lexsort((-speed, self.columns["base"]))
        first = np.ones(len(order), dtype=bool)
        first[1:] = self.columns["base"][order][1:] != self.columns["base"][order][:-1]
        return np.sort(order[first])

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
            "batch_per_gpu": c["micro_batch"], "spot": c["spot"],
            "network_gbps": c["network_gbps"], "interconnect": c["interconnect"],
            "accumulation": c["accumulation"], "checkpointing": c["checkpointing"],
            "sharded": c["sharded"], "channels_last": np.full(n, float(workload.channels_last)),
            "optimizer": np.full(n, workload.optimizer),
        }
        return configuration_features(configs, {workload.model: workload.model_features()})

    def spot_markets(self) -> list[tuple[str, str, str]]:
        """The (provider, GPU, region) spot markets among the candidates, each once."""
        spot = self.columns["spot"]
        return sorted(set(zip(*(self.columns[c][spot].tolist()
                                for c in ("provider", "gpu_type", "region")))))


def _datasheet(gpu_spec: Callable, name: str):
    """The datasheet row of a catalog GPU, None where gpus.csv has none."""
    try:
        return gpu_spec(name)
    except KeyError:
        return None


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
        # A GPU filter takes what people type (gpuadvisor.gpus): "A100" is every A100; a
        # driver's name is told apart by the rows' memory and form factor.
        rows = {name: _datasheet(gpu_spec, name) for name in known} if label == "GPU" else {}
        matches = {w: gpu_matches(w, rows) if label == "GPU"
                   else tuple(k for k in known if k.lower() == w.lower()) for w in wanted}
        unknown = sorted(w for w, names in matches.items() if not names)
        if unknown:
            # A GPU with a datasheet row but no offering (an RTX 3090, an A40) is not unknown:
            # neither cloud rents it.
            unrented = [w for w in unknown
                        if label == "GPU" and _datasheet(gpu_spec, w) is not None]
            what = (f"GPU {', '.join(unrented)} is not rented by GCP or AWS in the price catalog"
                    if unrented == unknown else f"unknown {label} {', '.join(unknown)}")
            raise CandidateError(f"{what}; the catalog has: {', '.join(known)}", parameter)
        match = np.isin(values, [name for names in matches.values() for name in names])
        reasons[Cut(FILTER_REASONS[label])] += int(rows_per_offering[keep & ~match].sum())
        keep &= match

    usable = np.asarray(offerings.get("gpu_memory_mib", np.full(len(gpu), np.nan)), float)
    specs = {name: gpu_spec(name) for name in sorted(set(gpu))}
    if workload.precision == "bf16":
        keep = _cut_without_bf16(keep, gpu, specs, filters, reasons, rows_per_offering)
    usable = np.where(np.isfinite(usable), usable, [specs[g].memory_mib for g in gpu])
    largest = float(usable[keep].max()) if keep.any() else None

    rows = []
    for spot, price in ((False, price_on_demand), (True, price_spot)):
        priced = keep & np.isfinite(price)
        index = np.repeat(np.flatnonzero(priced), filters.max_nodes)
        nodes = np.tile(np.arange(1, filters.max_nodes + 1), int(priced.sum()))
        rows.append((index, nodes, np.full(len(index), spot), price[index]))
    index, nodes, spot, price = (np.concatenate(parts) for parts in zip(*rows))
    workers = nodes * np.asarray(offerings["gpus_per_node"])[index]

    laid = layouts(workload, workers, usable[index])
    reasons.update(_unplaced(workload, laid.row, index, workers, gpu, usable))
    at = laid.row
    columns = {name: np.asarray(offerings[name])[index[at]] for name in OFFERING_COLUMNS}
    columns["provider"], columns["region"] = provider[index[at]], region[index[at]]
    columns["gpu_type"] = gpu[index[at]]
    columns.update(offering=index[at], nodes=nodes[at], spot=spot[at],
                   price_per_node_hour=price[at], base=at, gpu_memory_mib=usable[index[at]],
                   global_batch=laid.micro_batch * laid.accumulation * workers[at],
                   **laid.columns())
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


def _unplaced(workload: Workload, placed: np.ndarray, index: np.ndarray, workers: np.ndarray,
              gpu: np.ndarray, usable: np.ndarray) -> Counter:
    """Cuts of the (offering, nodes, market) rows no layout fits: more GPUs than the global
    batch has samples, or too little memory even for one sample under every remedy."""
    from advisor.memory import REMEDIES, need_mib

    cuts: Counter = Counter()
    missing = np.setdiff1d(np.arange(len(index)), placed)
    if workload.batch_policy == "fixed-global":
        small = workers[missing] > workload.global_batch
        cuts[Cut(Reason.BATCH_BELOW_GPUS)] += int(small.sum())
        missing = missing[~small]
    if not len(missing):
        return +cuts
    model = workload.memory_model()
    least = np.min([need_mib(model, r, 1, workers[missing]) for r in REMEDIES], axis=0)
    names = gpu[index[missing]]
    for g in sorted(set(names)):
        mine = names == g
        cuts[Cut(Reason.MEMORY, gpu=g, need_mib=round(float(least[mine].min())),
                 gpu_memory_mib=round(float(usable[index[missing][mine]].max())))] += int(
            mine.sum())
    return +cuts
