"""Importers: bring measurements made elsewhere into the measurement store.

- `cmdare`: CM-DARE's processed data (ICDCS 2020) -> trials, models, startups, checkpoints,
  accuracy_curves, all with source 'import:cmdare'.
- `runs`: the exchange JSON of `profiler runs --format json` -> trials and their child rows.
- `published`: datasets/published_throughput.csv -> trials with source 'published'.

Every importer is idempotent: importing the same data twice adds nothing the second time.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from advisor.errors import AdvisorError
from gpuadvisor.store import TABLES, Store

# Reference data that must not ship with the repository (CM-DARE's) lies under this directory;
# by default ../shared/reference beside the checkout.
REFERENCE_ENV = "GPUADVISOR_REFERENCE"


def reference_dir(name: str) -> Path:
    """The directory of the reference data set `name` (e.g. "cmdare"): $GPUADVISOR_REFERENCE/name,
    or ../shared/reference/name beside the checkout. It may not exist."""
    default = Path(__file__).resolve().parents[2].parent / "shared" / "reference"
    return Path(os.environ.get(REFERENCE_ENV) or default) / name


class ImportDataError(AdvisorError):
    """Data that cannot be imported; the message names what was expected and the fix."""


@dataclass
class ImportResult:
    """What an import added (rows per table), or that it was already there."""

    source: str
    fingerprint: str
    rows: dict[str, int] = field(default_factory=dict)
    already_imported: bool = False
    skipped: list[str] = field(default_factory=list)  # inputs not understood, with why
    warnings: list[str] = field(default_factory=list)  # imported, but not usable as they are


def fingerprint(files: Iterable[Path], root: Path) -> str:
    """Content hash of the files (and their paths relative to `root`), order-independent."""
    digest = hashlib.sha256()
    for path in sorted(files, key=lambda p: p.relative_to(root).as_posix()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


def already_imported(store: Store, source: str, print_: str) -> bool:
    """True when any table holds a row of `source` stamped with this import fingerprint."""
    for table, columns in TABLES.items():
        if "extra" not in columns:
            continue
        hit = store.query(
            f"SELECT 1 FROM {table} WHERE source = ? "
            "AND json_extract(extra, '$.import_fingerprint') = ? LIMIT 1",
            (source, print_),
        )
        if hit:
            return True
    return False
