"""Storing what a sink kept: every trial the orchestrator recorded in its sink (a `trial`
record) that the store lacks, e.g. because the store's disk was full when the trial ended.
Idempotent: a trial attempt already in the store is left as it is."""

from __future__ import annotations

from dataclasses import dataclass, field

from cloud.sinks import clusters, open_sink
from gpuadvisor.store import Store


@dataclass
class Reingested:
    stored: list[str] = field(default_factory=list)  # sweep/trial of each trial stored now
    already: int = 0  # trial attempts the store had
    without_trial: list[str] = field(default_factory=list)  # clusters with no trial record


def reingest(url: str, store: Store, *, client=None,
             found: list[str] | None = None) -> Reingested:
    """Store every trial record under `url` that `store` does not hold yet; `found`: the
    sink's clusters when the caller has listed them already (`cloud.sinks.clusters`)."""
    out = Reingested()
    for cluster in clusters(url, client=client) if found is None else found:
        sink = open_sink(url, cluster, client=client)
        try:
            kept = [r for r in sink.read_all() if r["type"] == "trial"]
        finally:
            sink.close()
        if not kept:
            out.without_trial.append(cluster)
        for record in kept:
            trial = record["rows"]["trial"]
            if store.add_trial_once(record["rows"]) is None:
                out.already += 1
            else:
                out.stored.append(f"{trial.get('sweep')}/{trial['trial_key']}")
    return out
