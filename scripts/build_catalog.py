"""Rebuild datasets/catalog_gcp.csv and datasets/catalog_aws.csv from the dated SkyPilot
catalog snapshot in ../shared/reference/skypilot/ (its README names the commit); prints the
rows the sanity rules refused. The logic is cloud/skypilot.py, shared with
`advisor catalog import skypilot`.

    PYTHONPATH=. .venv/bin/python scripts/build_catalog.py [SNAPSHOT_DIR]
"""

from __future__ import annotations

import sys
from collections import Counter
from datetime import date
from pathlib import Path

from advisor.importers import reference_dir
from cloud.catalog import COLUMNS, catalog_name, read_offerings, write_csv_atomically
from cloud.skypilot import build, carried

DATASETS = Path(__file__).resolve().parent.parent / "datasets"  # the repository's copy
REPOSITORY = "https://github.com/skypilot-org/skypilot-catalog"
COMMIT = "2c3d7ea7d76bf84cf80d382e946c1609571485fd"
AS_OF = date(2026, 11, 23)  # the day the snapshot was copied; the commit's own date is unknown
FILES = {"aws": ("aws_gpu_vms.csv", "catalogs/v9/aws/vms.csv"),
         "gcp": ("gcp_gpu_vms.csv", "catalogs/v9/gcp/vms.csv")}  # fmt: skip


def main() -> None:
    snapshot = Path(sys.argv[1]) if len(sys.argv) > 1 else reference_dir("skypilot")
    files = {p: snapshot / name for p, (name, _) in FILES.items()}
    source = {p: f"SkyPilot catalog {REPOSITORY} {path} @ {COMMIT}"
              for p, (_, path) in FILES.items()}  # fmt: skip
    for provider, result in build(files, source, AS_OF).items():
        target = DATASETS / catalog_name(provider)
        kept = carried(read_offerings(target), result.offerings)
        rows = result.offerings + kept
        write_csv_atomically(target, COLUMNS, (o.to_row() for o in rows))
        print(f"{target.name}: {len(result.offerings)} offerings from the snapshot, "
              f"{len(kept)} retired ones kept", file=sys.stderr)
        reasons = Counter(r.reason.split(" (")[0] for r in result.rejected)
        for reason, count in sorted(reasons.items()):
            print(f"  rejected {count:4d}: {reason}", file=sys.stderr)
        for r in result.rejected:
            print(f"    {r.provider} {r.region} {r.instance_type} {r.zone}: {r.reason}")


if __name__ == "__main__":
    main()
