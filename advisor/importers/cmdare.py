"""Import CM-DARE's processed data (cake-lab/CM-DARE, folder data/processed_data) into the
measurement store.

Layout read (any subset of it; other files are ignored):

    speed_data/*.csv                                   one worker + one PS, model features
    speed_data_base/<model><gpu>/*.csv                 single-worker TensorBoard exports
    speed_and_cluster_size/<gpu>[ps<P>]/<run>/*.csv    N workers, P parameter servers
    checkpoint/whole_data.csv (or unaggregated_*.csv)  checkpoint save times and sizes
    startup_time/<pre|on_demand>_<east|west>/*.csv     VM provisioning/staging/booting
    chief_rejoining/{base,exp-<step>}[-k].csv          accuracy vs step, chief revoked

What lands in which table and column is documented in cmdare_speeds (trials, models) and
cmdare_overheads (checkpoints, startups, accuracy_curves). Every row has source
'import:cmdare' and `extra.import_fingerprint`, a hash of the files read: importing the same
data again adds nothing. All rows are written in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from advisor.importers import ImportDataError, ImportResult, already_imported, fingerprint
from advisor.importers import cmdare_overheads as overheads
from advisor.importers import cmdare_speeds as speeds
from gpuadvisor.store import Store

SOURCE = "import:cmdare"
FOLDERS = ("speed_data", "speed_data_base", "speed_and_cluster_size", "checkpoint",
           "startup_time", "chief_rejoining")


def find_root(path: Path) -> Path:
    """The folder holding CM-DARE's data folders: PATH itself, PATH/processed_data or
    PATH/data/processed_data (a clone of the repository)."""
    path = Path(path)
    if not path.exists():
        raise ImportDataError(f"{path} does not exist; give the path of CM-DARE's "
                              "data/processed_data folder")
    for candidate in (path, path / "processed_data", path / "data" / "processed_data"):
        if candidate.is_dir() and any((candidate / f).is_dir() for f in FOLDERS):
            return candidate
    raise ImportDataError(
        f"{path} is not CM-DARE's processed data: expected folders {', '.join(FOLDERS)} "
        "(data/processed_data of cake-lab/CM-DARE)"
    )


def plan(root: Path) -> list[tuple[str, Path]]:
    """(kind, file) for every file the import reads, in reading order."""
    def csvs(pattern: str) -> list[Path]:
        return sorted(p for p in root.glob(pattern) if p.is_file())

    return (
        [("latency", p) for p in csvs("speed_data/*.csv")]
        + [("series", p) for p in csvs("speed_data_base/*/*.csv")]
        + [("series", p) for p in csvs("speed_and_cluster_size/*/*/*.csv")]
        + [("checkpoint_params", p) for p in csvs("checkpoint/*.csv")
           if p not in overheads.checkpoint_files(root / "checkpoint")]
        + [("checkpoint", p) for p in overheads.checkpoint_files(root / "checkpoint")]
        + [("startup", p) for p in csvs("startup_time/*/*.csv")]
        + [("rejoin", p) for p in csvs("chief_rejoining/*.csv")]
    )


def import_cmdare(path: Path, store: Store,
                  progress: Callable[[Path], None] | None = None) -> ImportResult:
    """Read a CM-DARE data folder into `store`; see the module docstring."""
    root = find_root(Path(path))
    files = plan(root)
    if not files:
        raise ImportDataError(f"{root} holds no CSV files in CM-DARE's layout "
                              f"({', '.join(FOLDERS)})")
    result = ImportResult(SOURCE, fingerprint([p for _, p in files], root))
    if already_imported(store, SOURCE, result.fingerprint):
        result.already_imported = True
        return result

    tables: dict[str, list[dict[str, Any]]] = {
        "trials": [], "models": [], "checkpoints": [], "startups": [], "accuracy_curves": []}
    features: dict[str, dict[str, Any]] = {}
    params = overheads.checkpoint_params(root / "checkpoint")
    tensors = overheads.checkpoint_tensors(root / "checkpoint")
    for kind, file in files:
        try:
            if kind == "latency":
                frame = speeds.latency_data(file)
                tables["trials"] += speeds.single_worker_trials(root, file, frame)
                features.update(speeds.model_features(frame))
            elif kind == "series":
                tables["trials"] += speeds.cluster_trials(root, [file])
            elif kind == "checkpoint":
                tables["checkpoints"] += overheads.checkpoint_rows(file, params)
            elif kind == "startup":
                tables["startups"] += overheads.startup_rows(file)
            elif kind == "rejoin":
                tables["accuracy_curves"] += overheads.accuracy_rows(file)
        except (ValueError, KeyError) as exc:  # a file that breaks the layout: skip, say why
            result.skipped.append(f"{file.relative_to(root)}: {exc}")
        if progress:
            progress(file)

    tables["models"] = _model_rows(features, params, tables)
    for row in tables["models"]:
        if row["model"] in tensors:
            row["extra"] = {**row["extra"], "tensors": tensors[row["model"]]}
    if not any(tables.values()):
        raise ImportDataError(f"nothing importable under {root}: " + "; ".join(result.skipped[:3]))
    for rows in tables.values():
        for row in rows:
            row["extra"] = {**(row.get("extra") or {}), "import_fingerprint": result.fingerprint}
    result.rows = store.add_many(tables)
    return result


def _model_rows(features: dict[str, dict[str, Any]], params: dict[str, int],
                tables: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per model named anywhere in the import, with what the data says about it."""
    names = set(features) | set(params)
    names |= {r["model"] for table in ("trials", "checkpoints") for r in tables[table]}
    rows = []
    for model in sorted(names):
        known = features.get(model, {})
        count = known.get("params", params.get(model))
        rows.append({
            "model": model,
            "params": count,
            "flops_per_sample": known.get("flops_per_sample"),
            "gradient_bytes": 4 * count if count else None,
            "activation_bytes": None,
            "source": SOURCE,
            "extra": known.get("extra", {}),
        })
    return rows
