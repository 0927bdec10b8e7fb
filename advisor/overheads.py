"""Cited overhead evidence by provider and market (datasets/overheads.csv), read by `advisor fit`.

Each artifact overhead has a prior per provider and market that the provider's own
measurements replace: a cloud never borrows another provider's figures, and never the local
provider's process start-ups. Keys are 'provider|spot' with '*' for any (spot '1', on-demand
'0'), as `advisor.artifact` looks them up.
"""

from __future__ import annotations

import csv
from pathlib import Path

from gpuadvisor import data

# The artifact's overhead targets and the overheads.csv component each one's prior comes from.
COMPONENTS = {"vm_s": "vm_s", "first_step_s": "first_step_s", "recovery_s": "rejoin_s"}
MARKETS = {"spot": "1", "on-demand": "0", "*": "*"}
# The local provider runs processes on this machine: no VM, and nothing published to cite.
LOCAL_SOURCE = "stated prior: a local process has no VM to start"
LOCAL_PRIORS = {"vm_s": 0.0, "first_step_s": 10.0, "recovery_s": 30.0}


def overhead_priors(path: Path | None = None) -> dict[str, dict[str, dict]]:
    """target -> 'provider|spot' -> {'s', 'low_s', 'high_s', 'source'}."""
    priors = {target: {"local|*": {"s": value, "low_s": value, "high_s": value,
                                   "source": LOCAL_SOURCE}}
              for target, value in LOCAL_PRIORS.items()}
    by_component = {component: target for target, component in COMPONENTS.items()}
    with open(path or data.find("overheads.csv"), newline="") as handle:
        for line, row in enumerate(csv.DictReader(handle), 2):
            target = by_component.get(row["component"])
            if target is None or row["market"] not in MARKETS:
                raise ValueError(f"overheads.csv line {line}: unknown component "
                                 f"{row['component']!r} or market {row['market']!r}")
            key = f"{row['provider'].lower()}|{MARKETS[row['market']]}"
            priors[target][key] = {"s": float(row["seconds"]), "low_s": float(row["low_s"]),
                                   "high_s": float(row["high_s"]),
                                   "source": row["source"]}
    return priors
