"""Refusing to overwrite a file that is not what a command writes: a measurement store given
as `-o` by mistake must survive, as must any other file the command did not make.

Shared by `profiler runs -o` and `advisor fit -o`, hence in the lowest room.
"""

from __future__ import annotations

import json
from pathlib import Path

SQLITE_MAGIC = b"SQLite format 3\x00"
PARQUET_MAGIC = b"PAR1"
TEXT_KINDS = ("table", "csv")


def overwrite_problem(path: Path, kind: str) -> str | None:
    """None when `path` is absent, empty or a file of `kind` (json, artifact, parquet, csv,
    table) that may be replaced; otherwise a one-line reason that names the fix."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        return None
    data = path.read_bytes()
    refuse = f"{path} exists and is not {_what(kind)}; it was left untouched: give another -o path"
    if data.startswith(SQLITE_MAGIC):
        return (f"{path} is an SQLite database (a measurement store?); it was left untouched: "
                "give another -o path")
    if kind == "parquet":
        return None if data.startswith(PARQUET_MAGIC) else refuse
    if kind in TEXT_KINDS:
        return None if _is_text(data) else refuse
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return refuse
    if kind == "artifact" and not (isinstance(doc, dict) and "schema_version" in doc):
        return refuse
    return None


def _is_text(data: bytes) -> bool:
    try:
        return "\x00" not in data.decode("utf-8")
    except UnicodeDecodeError:
        return False


def _what(kind: str) -> str:
    return {"artifact": "a model artifact (JSON)", "json": "JSON", "parquet": "a parquet file",
            "csv": "a text file", "table": "a text file"}[kind]
