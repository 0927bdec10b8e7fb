"""Import the exchange JSON (`profiler runs --format json`, datasets/measurements/*.json) into
a measurement store.

The file is a JSON list, one object per trial: every `trials` column plus `id`, and
`revocations`, `startups`, `checkpoints` (lists of their rows). Each object is validated
against the store's columns (pydantic), then appended with its child rows in one transaction;
ids are the store's own, so `id` and `trial_id` in the file are dropped. A trial already in
the store (same sweep, trial_key, status, recorded_at and source) is skipped: importing a file
twice, or into the store it came from, adds nothing.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from advisor.importers import ImportDataError, ImportResult, fingerprint
from gpuadvisor.store import (
    CHECKPOINT_COLUMNS,
    JSON_COLUMNS,
    REVOCATION_COLUMNS,
    STARTUP_COLUMNS,
    TRIAL_COLUMNS,
    Store,
)
from gpuadvisor.textfile import unreadable

CHILDREN = {"revocations": REVOCATION_COLUMNS, "startups": STARTUP_COLUMNS,
            "checkpoints": CHECKPOINT_COLUMNS}
IDENTITY = ("sweep", "trial_key", "status", "recorded_at", "source")


@cache
def _schema(name: str, columns: tuple[tuple[str, str], ...]):
    """A pydantic model of one table's row: SQL types -> Python types, NOT NULL -> required,
    unknown keys, NaN or infinite numbers and integers beyond SQLite's refused."""
    from typing import Annotated

    from pydantic import ConfigDict, Field, create_model

    sqlite_int = Annotated[int, Field(ge=-(2**63), lt=2**63)]
    kinds = {"TEXT": str, "INTEGER": sqlite_int, "REAL": float}
    fields: dict[str, Any] = {"id": (int | None, None), "trial_id": (int | None, None)}
    for column, sql in columns:
        kind = Any if column in JSON_COLUMNS else kinds[sql.split()[0]]
        fields[column] = (kind, ...) if "NOT NULL" in sql else (kind | None, None)
    return create_model(name, __config__=ConfigDict(extra="forbid", strict=False,
                                                   allow_inf_nan=False), **fields)


def _validated(table: str, columns: dict[str, str], row: Any, where: str) -> dict[str, Any]:
    from pydantic import ValidationError

    if not isinstance(row, dict):
        raise ImportDataError(f"{where} is not a JSON object")
    if table != "trials":  # child rows take trial_id from the store, and the trial's source
        columns = {k: v.replace(" NOT NULL", "") for k, v in columns.items() if k != "trial_id"}
    try:
        model = _schema(table, tuple(columns.items())).model_validate(row)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ImportDataError(f"{where}: {field}: {first['msg']} "
                              "(columns are those of the store's tables)") from None
    return {k: v for k, v in model.model_dump(exclude_unset=True).items()
            if k not in ("id", "trial_id")}


def load_runs(path: Path) -> list[dict[str, Any]]:
    """The file's trials, validated: each with its child rows under their table names."""
    path = Path(path)
    if not path.is_file():
        raise ImportDataError(f"{path} is not a file; give a JSON file written by "
                              "`profiler runs --format json`")
    try:
        data = json.loads(path.read_text())
    except UnicodeDecodeError as exc:
        raise ImportDataError(f"{unreadable(path, exc)} written by `profiler runs --format "
                              "json`") from None
    except json.JSONDecodeError as exc:
        raise ImportDataError(f"{path} is not JSON ({exc}); give a file written by "
                              "`profiler runs --format json`") from None
    if not isinstance(data, list):
        raise ImportDataError(f"{path} holds a JSON {type(data).__name__}, not a list of trials "
                              "(the form of `profiler runs --format json`)")
    trials = []
    for index, obj in enumerate(data):
        where = f"{path.name} trial {index}"
        if not isinstance(obj, dict):
            raise ImportDataError(f"{where} is not a JSON object")
        children = {table: obj.get(table) or [] for table in CHILDREN}
        for table, rows in children.items():
            if not isinstance(rows, list):
                raise ImportDataError(f"{where}: {table} is not a list of rows")
        trial = _validated("trials", TRIAL_COLUMNS,
                           {k: v for k, v in obj.items() if k not in CHILDREN}, where)
        trial["children"] = {
            table: [_validated(table, CHILDREN[table], row, f"{where} {table}[{i}]")
                    for i, row in enumerate(rows)]
            for table, rows in children.items()
        }
        trials.append(trial)
    return trials


def _present(store: Store, trial: dict[str, Any]) -> bool:
    clause = " AND ".join(f"{col} IS ?" for col in IDENTITY)
    return bool(store.query(f"SELECT 1 FROM trials WHERE {clause} LIMIT 1",
                            [trial.get(col) for col in IDENTITY]))


def import_runs(path: Path, store: Store) -> ImportResult:
    """Append the file's trials (and their revocations, start-ups, checkpoints) to `store`."""
    trials = load_runs(path)
    result = ImportResult("runs", fingerprint([Path(path)], Path(path).parent),
                          rows={"trials": 0, **{table: 0 for table in CHILDREN}})
    for trial in trials:
        children = trial.pop("children")
        if _present(store, trial):
            result.skipped.append(f"trial {trial['trial_key']!r} ({trial.get('sweep')}) "
                                  "is already in the store")
            continue
        store.add_trial(trial, **children)
        result.rows["trials"] += 1
        for table, rows in children.items():
            result.rows[table] += len(rows)
    result.already_imported = bool(trials) and result.rows["trials"] == 0
    return result
