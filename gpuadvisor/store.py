"""The measurement store: append-only SQLite shared by the profiler and the advisor.

Every row carries what is needed to interpret it later (provider, region, instance type,
price at the time, spot flag, software versions, source). Rows are never updated or
deleted: triggers refuse it. Several sweeps may write at once: WAL journal, a busy timeout
and one `BEGIN IMMEDIATE` transaction per write keep every row.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpuadvisor.errors import GpuAdvisorError
from gpuadvisor.migrations import MIGRATIONS

# Column name -> SQL type, per table. The order is the order of export.
TRIAL_COLUMNS: dict[str, str] = {
    "trial_key": "TEXT NOT NULL",  # identity of a trial within its sweep, for resume
    "sweep": "TEXT",
    "status": "TEXT NOT NULL",  # finished | failed | interrupted
    "error": "TEXT",
    "recorded_at": "TEXT NOT NULL",
    "source": "TEXT NOT NULL",  # local | gcp | aws | import:cmdare | published
    "provider": "TEXT",
    "region": "TEXT",
    "zone": "TEXT",
    "instance_type": "TEXT",
    "gpu_type": "TEXT",  # NULL for CPU-only nodes
    "gpus_per_node": "INTEGER",
    "nodes": "INTEGER",
    "sync": "TEXT",  # allreduce | ps
    "ps_count": "INTEGER",
    "spot": "INTEGER",
    "price_per_node_hour": "REAL",  # USD at the time of the trial
    "model": "TEXT",
    "batch_per_gpu": "INTEGER",  # per worker process (per GPU, or per CPU process)
    "precision": "TEXT",  # fp32 | amp | bf16 | tf32
    "image_size": "INTEGER",
    "seq_len": "INTEGER",
    "throughput": "REAL",  # samples/s of the whole cluster
    "throughput_lo": "REAL",  # 95% interval of the throughput estimate
    "throughput_hi": "REAL",
    "step_time_mean": "REAL",  # seconds
    "step_time_median": "REAL",
    "step_time_p95": "REAL",
    "steps_measured": "INTEGER",
    "warmup_steps": "INTEGER",
    "stable": "INTEGER",  # 1 when the interval met the tolerance before the time limit
    "peak_memory_bytes": "INTEGER",
    "time_to_first_step": "REAL",  # seconds from process start to the first finished step
    "checkpoint_save_s": "REAL",
    "checkpoint_restore_s": "REAL",
    "checkpoint_bytes": "INTEGER",
    "software": "TEXT",  # JSON: python, torch, cuda, nccl, project versions
    "extra": "TEXT",  # JSON: anything else worth keeping
    # Rank 0's GPU memory peaks, torch.cuda.max_memory_allocated / _reserved; NULL on CPU.
    "peak_allocated_bytes": "INTEGER",
    "peak_reserved_bytes": "INTEGER",
}

REVOCATION_COLUMNS: dict[str, str] = {
    "trial_id": "INTEGER NOT NULL REFERENCES trials(id)",
    "node": "INTEGER",
    "cause": "TEXT",  # sigkill | preemption | maintenance | interruption
    "at_seconds": "REAL",  # since trial start
    "notice_s": "REAL",  # warning given before the node went (30 s GCP, 120 s AWS, 0 local)
    "detect_s": "REAL",  # revocation -> survivors noticed
    "rendezvous_s": "REAL",  # revocation -> new rendezvous complete
    "restore_s": "REAL",  # checkpoint restore duration
    "first_step_after_s": "REAL",  # revocation -> first finished step after
    "steps_lost": "INTEGER",  # steps redone since the last checkpoint
    "replacement_ready_s": "REAL",  # revocation -> replacement node training
    "source": "TEXT NOT NULL",
    "extra": "TEXT",
}

STARTUP_COLUMNS: dict[str, str] = {
    "trial_id": "INTEGER REFERENCES trials(id)",
    "node": "INTEGER",
    "provider": "TEXT",
    "region": "TEXT",
    "zone": "TEXT",
    "instance_type": "TEXT",
    "gpu_type": "TEXT",
    "spot": "INTEGER",
    "provisioning_s": "REAL",  # request -> resources allocated
    "staging_s": "REAL",  # allocated -> running
    "booting_s": "REAL",  # running -> node agent up
    "first_step_s": "REAL",  # node agent up -> first training step
    "recorded_at": "TEXT",
    "source": "TEXT NOT NULL",
    "extra": "TEXT",
}

CHECKPOINT_COLUMNS: dict[str, str] = {
    "trial_id": "INTEGER REFERENCES trials(id)",
    "model": "TEXT",
    "params": "INTEGER",
    "bytes": "INTEGER",
    "target": "TEXT",  # local | bucket
    "save_s": "REAL",
    "restore_s": "REAL",
    "recorded_at": "TEXT",
    "source": "TEXT NOT NULL",
    "extra": "TEXT",
}

# Features of models that are not in the zoo (imported data sets bring their own).
MODEL_COLUMNS: dict[str, str] = {
    "model": "TEXT NOT NULL",
    "params": "INTEGER",
    "flops_per_sample": "REAL",  # forward + backward
    "gradient_bytes": "INTEGER",
    "activation_bytes": "REAL",  # per sample
    "recorded_at": "TEXT",
    "source": "TEXT NOT NULL",
    "extra": "TEXT",
}

# Observed lifetimes of spot / preemptible nodes, for the survival model.
LIFETIME_COLUMNS: dict[str, str] = {
    "provider": "TEXT",
    "region": "TEXT",
    "gpu_type": "TEXT",
    "spot": "INTEGER",
    "lifetime_s": "REAL",
    "revoked": "INTEGER",  # 0 = censored (the node was still alive when observation ended)
    "recorded_at": "TEXT",
    "source": "TEXT NOT NULL",
    "extra": "TEXT",
}

# Accuracy against training step, e.g. CM-DARE's runs where the chief worker is revoked at
# `revoked_at_step` and rejoins (event 'chief_rejoin'), and their baselines (event 'baseline').
ACCURACY_COLUMNS: dict[str, str] = {
    "run": "TEXT NOT NULL",  # one curve = all rows of one run
    "event": "TEXT",  # baseline | chief_rejoin
    "revoked_at_step": "INTEGER",
    "step": "INTEGER",
    "wall_time": "REAL",  # unix seconds
    "accuracy": "REAL",  # evaluation accuracy, 0..1
    "model": "TEXT",
    "gpu_type": "TEXT",
    "recorded_at": "TEXT",
    "source": "TEXT NOT NULL",
    "extra": "TEXT",
}

# What readers and writers use; gpuadvisor/migrations.py builds it (a test checks they agree).
TABLES: dict[str, dict[str, str]] = {
    "trials": TRIAL_COLUMNS,
    "revocations": REVOCATION_COLUMNS,
    "startups": STARTUP_COLUMNS,
    "checkpoints": CHECKPOINT_COLUMNS,
    "models": MODEL_COLUMNS,
    "lifetimes": LIFETIME_COLUMNS,
    "accuracy_curves": ACCURACY_COLUMNS,
}

# Bookkeeping beside the measurements, never exported: which run owns a trial (migration 3).
LEASE_COLUMNS: dict[str, str] = {
    "sweep": "TEXT NOT NULL",
    "trial_key": "TEXT NOT NULL",
    "owner": "TEXT NOT NULL",  # host:pid:token of the sweep process
    "host": "TEXT",
    "pid": "INTEGER",
    "acquired_at": "REAL NOT NULL",  # time.time()
    "expires_at": "REAL NOT NULL",  # the owner renews it while the trial runs
}
INTERNAL_TABLES: dict[str, dict[str, str]] = {"trial_leases": LEASE_COLUMNS}

JSON_COLUMNS = {"software", "extra"}
SCHEMA_VERSION = len(MIGRATIONS)
# PRAGMA application_id of a measurement store ("GPAD"); stores made before it was set carry 0
# and are told apart by their schema version and tables.
APPLICATION_ID = 0x47504144


class StoreError(GpuAdvisorError):
    """A store that cannot be opened or written; the message names the fix."""

    exit_code = 2


class StoreWriteError(StoreError):
    """A write SQLite refused (a full disk, a read-only medium); `reason` is its message."""

    def __init__(self, path: Path, reason: str):
        self.reason = reason
        super().__init__(f"cannot write to {path} ({reason}); free space or fix its "
                         "permissions, then run the command again")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Store:
    """An open measurement store. Use as a context manager or call `close()`.

    `create=False` opens only a store that exists (readers, and commands that must not make
    one by accident); `readonly=True` reads through a `mode=ro` connection, so a store on a
    read-only file or medium can be read, and nothing is ever written to it. A file that is
    not a measurement store (another program's SQLite database, or any other file) is
    refused before anything is written to it.
    """

    def __init__(self, path: str | Path, *, timeout_s: float = 60.0, create: bool = True,
                 readonly: bool = False):
        self.path = Path(path)
        if self.path.is_dir():
            raise StoreError(f"{self.path} is a directory; give a file path such as runs.db")
        empty = not self.path.exists() or self.path.stat().st_size == 0
        if empty and (readonly or not create):
            raise StoreError(f"no measurement store at {self.path}; give the store a sweep "
                             "or an import wrote (`profiler sweep SPEC --store runs.db`)")
        self.readonly = readonly
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if readonly:
                    self._open_readonly(timeout_s)
                else:
                    self._open_for_writing(timeout_s)
                return
            except sqlite3.DatabaseError as exc:
                self._close_quietly()
                # Two sweeps creating one store at once: SQLite may refuse the switch to WAL
                # with "locked" rather than wait; the other has finished in a moment.
                locked = isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)
                if not locked or time.monotonic() > deadline:
                    raise StoreError(f"{self.path} is not a measurement store ({exc}); give "
                                     "another store file") from None
                time.sleep(0.05)

    def _open_for_writing(self, timeout_s: float) -> None:
        self._db = _connect(str(self.path), timeout_s)
        self._check_identity()
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._migrate()

    def _close_quietly(self) -> None:
        db = getattr(self, "_db", None)
        if db is not None:
            db.close()

    def _open_readonly(self, timeout_s: float) -> None:
        """A read-only connection; a store older than this program is upgraded first when
        its file can be written (the upgrade only adds tables and columns)."""
        uri = f"{self.path.resolve().as_uri()}?mode=ro"
        self._db = _connect(uri, timeout_s, uri=True)
        self._check_identity()
        version = self.schema_version
        if version < SCHEMA_VERSION:
            self._db.close()
            if not os.access(self.path, os.W_OK):
                raise StoreError(
                    f"{self.path} has schema version {version}, older than "
                    f"this program's {SCHEMA_VERSION}, and is read-only; make it writable "
                    "once so that it can be upgraded")
            Store(self.path, timeout_s=timeout_s).close()
            self._db = _connect(uri, timeout_s, uri=True)

    def _check_identity(self) -> None:
        """Refuse a database that is not a measurement store: another application's id, or
        tables without this schema's version mark."""
        # One read transaction: a store another process is creating is seen before or after
        # its migration, never with its tables but not yet its version.
        self._db.execute("BEGIN")
        try:
            app_id, version = self._application_id(), self.schema_version
            tables = {row[0] for row in self._db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")} - {"sqlite_sequence"}
        finally:
            self._db.execute("COMMIT")
        foreign = app_id not in (0, APPLICATION_ID) or (version == 0 and tables) or (
            version > 0 and "trials" not in tables)
        if foreign:
            self._db.close()
            raise StoreError(f"{self.path} is an SQLite database but not a measurement store; "
                             "give another store path (it was left untouched)")

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _write(self):
        if self.readonly:
            raise StoreError(f"{self.path} was opened read-only")
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:  # SQLite rolls back itself on a full disk
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            raise StoreWriteError(self.path, str(exc)) from None

    def _migrate(self) -> None:
        """Bring the store to this program's schema; a current store is not written."""
        current = (SCHEMA_VERSION, APPLICATION_ID)
        if (self.schema_version, self._application_id()) == current:
            return
        with self._write() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has schema version {version}, newer than this program's "
                    f"{SCHEMA_VERSION}; upgrade the package"
                )
            for number in range(version, SCHEMA_VERSION):
                for statement in _statements(MIGRATIONS[number]):
                    db.execute(statement)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            db.execute(f"PRAGMA application_id={APPLICATION_ID}")

    @property
    def schema_version(self) -> int:
        return self._db.execute("PRAGMA user_version").fetchone()[0]

    def _application_id(self) -> int:
        return self._db.execute("PRAGMA application_id").fetchone()[0]

    # -- writing -------------------------------------------------------------------------

    def add_trial(
        self,
        trial: Mapping[str, Any],
        *,
        revocations: Iterable[Mapping[str, Any]] = (),
        startups: Iterable[Mapping[str, Any]] = (),
        checkpoints: Iterable[Mapping[str, Any]] = (),
    ) -> int:
        """Append one trial and its child rows in one transaction; returns the trial id."""
        with self._write() as db:
            return _insert_trial(db, trial, {"revocations": revocations, "startups": startups,
                                             "checkpoints": checkpoints})

    def add_trial_once(self, rows: Mapping[str, Any]) -> int | None:
        """Store a trial kept in a sink (the orchestrator's `trial` record: its row, with
        extra.attempt, and its child rows) unless that attempt is stored already; returns
        the new trial id, or None. Checked and written in one transaction: two ingests of
        one sink at once store it once."""
        trial = rows["trial"]
        with self._write() as db:
            if _has_attempt(db, trial.get("sweep"), trial["trial_key"],
                            trial["extra"]["attempt"]):
                return None
            return _insert_trial(db, trial, rows)

    def add_rows(self, table: str, rows: Iterable[Mapping[str, Any]]) -> int:
        """Append many rows to one table in one transaction; returns how many."""
        return self.add_many({table: rows})[table]

    def add_many(self, rows_by_table: Mapping[str, Iterable[Mapping[str, Any]]]) -> dict[str, int]:
        """Append rows to several tables in one transaction (an import lands whole or not at
        all); returns how many rows per table."""
        counts = {}
        with self._write() as db:
            for table, rows in rows_by_table.items():
                counts[table] = 0
                for row in rows:
                    _insert(db, table, row)
                    counts[table] += 1
        return counts

    # -- reading -------------------------------------------------------------------------

    def rows(self, table: str, where: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """All rows of a table (optionally filtered by equality), JSON columns decoded."""
        _check_table(table)
        where = dict(where or {})
        for col in where:
            _check_column(table, col)
        clause = " AND ".join(f"{col} = ?" for col in where)
        sql = f"SELECT * FROM {table}" + (f" WHERE {clause}" if clause else "") + " ORDER BY id"
        return [_decode(row) for row in self._db.execute(sql, list(where.values()))]

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return [_decode(row) for row in self._db.execute(sql, params)]

    # -- leases --------------------------------------------------------------------------

    def claim_trial(self, sweep: str, key: str, owner: str, *, host: str, pid: int,
                    ttl_s: float, now: float) -> dict[str, Any] | None:
        """Own a trial for `ttl_s`: None when claimed (or renewed, for its own owner), else
        the lease of the live run that owns it. A lease past its expiry, or of a process
        that is gone from this host, is taken over."""
        with self._write() as db:
            held = db.execute("SELECT * FROM trial_leases WHERE sweep = ? AND trial_key = ?",
                              (sweep, key)).fetchone()
            if held is not None and held["owner"] != owner and held["expires_at"] > now and \
                    not (held["host"] == host and not _pid_alive(held["pid"])):
                return dict(held)
            db.execute("DELETE FROM trial_leases WHERE sweep = ? AND trial_key = ?",
                       (sweep, key))
            db.execute("INSERT INTO trial_leases (sweep, trial_key, owner, host, pid, "
                       "acquired_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (sweep, key, owner, host, pid, now, now + ttl_s))
        return None

    def release_trial(self, sweep: str, key: str, owner: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM trial_leases WHERE sweep = ? AND trial_key = ? AND "
                       "owner = ?", (sweep, key, owner))

    def finished_trial_keys(self, sweep: str) -> set[str]:
        """Keys of the trials of a sweep that finished, so a re-run can skip them."""
        rows = self._db.execute(
            "SELECT DISTINCT trial_key FROM trials WHERE sweep = ? AND status = 'finished'",
            (sweep,),
        )
        return {row[0] for row in rows}


def _pid_alive(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _insert_trial(db: sqlite3.Connection, trial: Mapping[str, Any],
                  children: Mapping[str, Iterable[Mapping[str, Any]]]) -> int:
    trial_id = _insert(db, "trials", {"recorded_at": now_iso(), **trial})
    for table in ("revocations", "startups", "checkpoints"):
        for row in children.get(table, ()):
            _insert(db, table, {"source": trial.get("source"), **row, "trial_id": trial_id})
    return trial_id


def _has_attempt(db: sqlite3.Connection, sweep: str | None, key: str, attempt: str) -> bool:
    return db.execute(
        "SELECT 1 FROM trials WHERE sweep IS ? AND trial_key = ? "
        "AND json_extract(extra, '$.attempt') = ?", (sweep, key, attempt)).fetchone() is not None


def _connect(database: str, timeout_s: float, uri: bool = False) -> sqlite3.Connection:
    db = sqlite3.connect(database, timeout=timeout_s, isolation_level=None, uri=uri)
    db.row_factory = sqlite3.Row
    db.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
    return db


def _statements(script: str) -> list[str]:
    """Split a migration script into statements (triggers contain inner semicolons)."""
    out, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            out.append(current.strip())
            current = ""
    return [s for s in out if s]


def _check_table(table: str) -> None:
    if table not in TABLES:
        raise StoreError(f"unknown table {table!r}; tables are {', '.join(TABLES)}")


def _check_column(table: str, column: str) -> None:
    if column not in TABLES[table] and column != "id":
        raise StoreError(
            f"unknown column {column!r} for {table}; columns are {', '.join(TABLES[table])}"
        )


def _insert(db: sqlite3.Connection, table: str, row: Mapping[str, Any]) -> int:
    _check_table(table)
    values = {}
    for col, value in row.items():
        _check_column(table, col)
        if col in JSON_COLUMNS and value is not None and not isinstance(value, str):
            value = json.dumps(value, sort_keys=True)
        elif isinstance(value, bool):
            value = int(value)
        values[col] = value
    cols = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    cursor = db.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks})", list(values.values()))
    return int(cursor.lastrowid)


def _decode(row: sqlite3.Row) -> dict[str, Any]:
    out = dict(row)
    for col in JSON_COLUMNS & out.keys():
        if isinstance(out[col], str):
            try:
                out[col] = json.loads(out[col])
            except json.JSONDecodeError:
                pass
    return out
