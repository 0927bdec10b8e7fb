"""What a plan is charged for start-up and for each revocation, and how soon spot nodes are
revoked, per provider, market and region, from the shipped (or a given) fitted artifact.

    .venv/bin/python benchmarks/overheads_lifetimes.py [--artifact datasets/model_artifact.json]

Start-up = VM start + image/install/first step; a revocation stalls the whole job for the
replacement's start-up plus the rejoin (`advisor.optimizer`). P(revoked within t) =
1 - S(t) of the node-life curve `Artifact.lifetime` gives the market (preemptible: the legacy
GCP VMs CM-DARE measured, cut at 24 h; spot: GCP Spot VMs / AWS Spot, no cap).
"""

from __future__ import annotations

import argparse

from advisor.artifact import load_artifact

MARKETS = (("gcp", False), ("gcp", True), ("aws", False), ("aws", True))
REGIONS = (("gcp", "us-central1"), ("gcp", "us-west1"), ("gcp", "europe-west1"),
           ("gcp", "us-east1"), ("gcp", "asia-east1"), ("aws", "us-east-1"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifact", default=None)
    artifact = load_artifact(parser.parse_args().artifact)
    print("provider  market      start-up s  revocation wait s  (vm + first step + rejoin)")
    for provider, spot in MARKETS:
        parts = artifact.overhead_sources(provider, "A100-40GB", spot)
        vm, first, rejoin = (parts[k]["seconds"] for k in ("vm_s", "first_step_s",
                                                            "recovery_s"))
        market = "spot" if spot else "on-demand"
        print(f"{provider:<9} {market:<11} {vm + first:>10.1f}  {vm + first + rejoin:>17.1f}"
              f"  ({vm:g} + {first:g} + {rejoin:g})")
    print("\nprovider  region         kind         shape   P(<=1h)  P(<=24h)  P(<=48h)")
    for provider, region in REGIONS:
        kinds = (("preemptible", True), ("spot", False)) if provider == "gcp" \
            else (("spot", False),)
        for kind, preemptible in kinds:
            life = artifact.lifetime(provider, "A100-40GB", region, True,
                                     preemptible=preemptible)
            within = 1 - life.survival([3600.0, 86400.0 - 1e-6, 2 * 86400.0])
            print(f"{provider:<9} {region:<14} {kind:<12} {life.shape:>5.3f}  {within[0]:>7.2f}"
                  f"  {within[1]:>8.2f}  {within[2]:>8.2f}")


if __name__ == "__main__":
    main()
