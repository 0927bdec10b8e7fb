"""CM-DARE overheads -> `checkpoints`, `startups` and `accuracy_curves` rows.

- `checkpoints`: every per-save row of checkpoint/whole_data.csv (or, without it, of the
  `unaggregated_*.csv` files it is the union of) becomes two rows: target 'local' (save_s =
  `Local duration`) and target 'bucket' (save_s = `Duration`, the save to a Cloud Storage
  bucket). `bytes` = `Checkpoint Size (MB)` x 2**20 (the sizes are MiB: ResNet-15's weight
  file, 5.3, is its 693,818 parameters x 8 bytes, weights plus momentum, in MiB). `params`
  from the model features when known. trial_id NULL (not tied to a training trial).
- `startups`: startup_time/<market>_<region>/*<gpu>*.csv rows `Provisioning, Staging,
  Booting` -> provisioning_s, staging_s, booting_s; spot = market starts with 'pre'
  (preemptible); region 'us-east1' / 'us-west1' (the folders say east/west; in 2019 those were
  GCP's only US east/west regions with both K80 and P100); provider 'gcp'; trial_id NULL.
- `accuracy_curves`: chief_rejoining/base[-k].csv (event 'baseline') and
  exp-<step>[-k].csv (event 'chief_rejoin', revoked_at_step = step): one row per
  (Wall time, Step, Value) with accuracy = Value; run = the file name without '.csv'.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from advisor.importers.cmdare_names import canonical_gpu, canonical_model

MIB = 2**20
_REJOIN = re.compile(r"^(?:(?P<base>base)|exp-(?P<step>\d+))(?:-(?P<rep>\d+))?$")


def checkpoint_files(folder: Path) -> list[Path]:
    whole = folder / "whole_data.csv"
    return [whole] if whole.is_file() else sorted(folder.glob("unaggregated_*.csv"))


def checkpoint_params(folder: Path) -> dict[str, int]:
    """Canonical model -> parameter count from the aggregated checkpoint tables."""
    return _per_model(folder, "Number of Parameters")


def checkpoint_tensors(folder: Path) -> dict[str, int]:
    """Canonical model -> number of tensors in its checkpoint (variables plus optimizer
    slots): the per-layer work a step does, whatever the layers' sizes."""
    return _per_model(folder, "Number of Tensors")


def _per_model(folder: Path, column: str) -> dict[str, int]:
    import pandas as pd

    out = {}
    for path in sorted(folder.glob("*.csv")):
        try:
            frame = pd.read_csv(path)
        except ValueError:  # empty, binary or broken: the import reports the files it reads
            continue
        if {"Model", column} <= set(frame.columns):
            for model, count in zip(frame["Model"], frame[column]):
                if pd.notna(count):
                    out.setdefault(canonical_model(str(model)), int(count))
    return out


def checkpoint_rows(path: Path, params: dict[str, int]) -> list[dict[str, Any]]:
    import pandas as pd

    frame = pd.read_csv(path)
    needed = {"Model", "Local duration", "Duration", "Checkpoint Size (MB)"}
    if needed - set(frame.columns):
        raise ValueError(f"{path} lacks columns {sorted(needed - set(frame.columns))}")
    rows = []
    for record in frame.to_dict("records"):
        model = canonical_model(str(record["Model"]))
        for target, column in (("local", "Local duration"), ("bucket", "Duration")):
            rows.append({
                "model": model,
                "params": params.get(model),
                "bytes": round(float(record["Checkpoint Size (MB)"]) * MIB),
                "target": target,
                "save_s": float(record[column]),
                "source": "import:cmdare",
                "extra": {"file": path.name, "model_as_published": record["Model"]},
            })
    return rows


def _gpu_in(file_name: str) -> str:
    for token in re.split(r"[_\-.]", file_name.lower()):
        try:
            return canonical_gpu(token)
        except ValueError:
            continue
    raise ValueError(f"no GPU name (k80, p100, v100, ...) in start-up file name {file_name!r}")


def startup_rows(path: Path) -> list[dict[str, Any]]:
    """One row per VM start of startup_time/<market>_<region>/<file>.csv."""
    import pandas as pd

    market, _, region = path.parent.name.lower().rpartition("_")
    if market not in ("pre", "on_demand") or region not in ("east", "west"):
        raise ValueError(
            f"start-up folder {path.parent.name!r} is not <pre|on_demand>_<east|west>"
        )
    frame = pd.read_csv(path)
    if {"Provisioning", "Staging", "Booting"} - set(frame.columns):
        raise ValueError(f"{path} lacks the columns Provisioning, Staging, Booting")
    gpu = _gpu_in(path.name)
    return [
        {
            "provider": "gcp",
            "region": f"us-{region}1",
            "gpu_type": gpu,
            "spot": market == "pre",
            "provisioning_s": float(r["Provisioning"]),
            "staging_s": float(r["Staging"]),
            "booting_s": float(r["Booting"]),
            "source": "import:cmdare",
            "extra": {"file": f"{path.parent.name}/{path.name}"},
        }
        for r in frame.dropna(subset=["Provisioning", "Staging", "Booting"]).to_dict("records")
    ]


def accuracy_rows(path: Path) -> list[dict[str, Any]]:
    """Accuracy vs step of one chief-rejoin (or baseline) run."""
    import pandas as pd

    match = _REJOIN.match(path.stem)
    if not match:
        raise ValueError(f"chief-rejoin file {path.name!r} is not base[-k].csv or "
                         "exp-<step>[-k].csv")
    frame = pd.read_csv(path).dropna(subset=["Step", "Value"])
    event = "baseline" if match["base"] else "chief_rejoin"
    return [
        {
            "run": path.stem,
            "event": event,
            "revoked_at_step": int(match["step"]) if match["step"] else None,
            "step": int(r["Step"]),
            "wall_time": float(r["Wall time"]),
            "accuracy": float(r["Value"]),
            "source": "import:cmdare",
            "extra": {"repetition": int(match["rep"] or 0)},
        }
        for r in frame.to_dict("records")
    ]
