"""Quotas and capacity: restrict the plans to a market and a number of GPUs, and say which
plans need more than a fresh account's default quota (datasets/quotas.csv, cited). csv and
numpy only: this runs on the recommend path."""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass
from functools import cache

import numpy as np

from advisor.candidates import Candidates
from advisor.errors import NoPlanError, ParameterError
from advisor.reasons import Cut, Reason
from gpuadvisor import data
from gpuadvisor.vocab import MARKETS


@dataclass(frozen=True)
class Quota:
    provider: str
    name: str
    code: str
    unit: str  # GPUs | vCPUs
    market: str  # on-demand | spot | *
    families: tuple[str, ...]  # instance type prefixes (AWS: p, g); ('*',) for all
    fresh_default: float
    source: str


def check_restrictions(market: str | None, max_gpus: int | None) -> None:
    if market is not None and market not in MARKETS:
        raise ParameterError(f"market must be on-demand or spot, got {market!r}", "market")
    if max_gpus is not None and max_gpus < 1:
        raise ParameterError(f"max_gpus must be at least 1, got {max_gpus}", "max_gpus")


def restrict(candidates: Candidates, market: str | None, max_gpus: int | None) -> Candidates:
    """The candidates of one market and at most `max_gpus` GPUs in all; what goes is counted
    in `dropped`. Raises NoPlanError when nothing is left."""
    keep = np.ones(len(candidates), dtype=bool)
    cuts: Counter = Counter()
    if market is not None:
        match = candidates["spot"] == (market == "spot")
        cuts[Cut(Reason.MARKET_FILTER)] = int((keep & ~match).sum())
        keep &= match
    if max_gpus is not None:
        small = candidates["nodes"] * candidates["gpus_per_node"] <= max_gpus
        cuts[Cut(Reason.MAX_GPUS)] = int((keep & ~small).sum())
        keep &= small
    if keep.all():
        return candidates
    if not keep.any():
        fewest = int((candidates["gpus_per_node"]).min()) if len(candidates) else 0
        raise NoPlanError(f"no plan is left with market {market or 'any'} and max_gpus "
                          f"{max_gpus or 'any'} (the smallest offering has {fewest} GPU(s)); "
                          "widen market or max_gpus", "market", "max_gpus")
    kept = candidates.take(np.flatnonzero(keep))
    kept.dropped = candidates.dropped + +cuts
    return kept


@cache
def load_quotas() -> tuple[Quota, ...]:
    with open(data.find("quotas.csv"), newline="") as handle:
        return tuple(Quota(row["provider"], row["quota"], row["quota_code"], row["unit"],
                           row["market"], tuple(row["families"].split(";")),
                           float(row["fresh_default"]), row["source"])
                     for row in csv.DictReader(handle))


def quota_note(plan: dict, vcpus: int) -> str | None:
    """What a plan needs beyond the fresh-account default of every quota it counts against
    (None when it fits them all); `vcpus` per node (AWS quotas count vCPUs)."""
    notes = []
    for quota in load_quotas():
        if quota.provider != plan["provider"] or quota.market not in ("*", plan["market"]):
            continue
        if quota.families != ("*",) and not plan["instance_type"].startswith(quota.families):
            continue
        per_node = plan["gpus_per_node"] if quota.unit == "GPUs" else vcpus
        need = plan["nodes"] * per_node
        if need > quota.fresh_default:
            unit = quota.unit.removesuffix("s") if need == 1 else quota.unit  # 1 GPU, 2 GPUs
            notes.append(f"{quota.name} ({quota.code}): needs {need} {unit}, a fresh "
                         f"account has {quota.fresh_default:g}")
    return "; ".join(notes) or None
