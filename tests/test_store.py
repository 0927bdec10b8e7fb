import multiprocessing
import sqlite3

import pytest

from gpuadvisor.migrations import MIGRATIONS
from gpuadvisor.store import INTERNAL_TABLES, SCHEMA_VERSION, TABLES, Store, StoreError


def _trial(i: int) -> dict:
    return {"trial_key": f"t{i}", "sweep": "s", "status": "finished", "source": "local",
            "model": "resnet18", "nodes": 1, "throughput": 10.0 + i, "software": {"torch": "x"}}


def test_trial_with_children_roundtrip(tmp_path):
    with Store(tmp_path / "m.db") as store:
        tid = store.add_trial(_trial(1), revocations=[{"node": 1, "detect_s": 1.5}])
        assert store.schema_version == SCHEMA_VERSION
        [row] = store.rows("trials")
        assert row["id"] == tid and row["software"] == {"torch": "x"}
        [rev] = store.rows("revocations", {"trial_id": tid})
        assert rev["detect_s"] == 1.5 and rev["source"] == "local"
        assert store.finished_trial_keys("s") == {"t1"}


def _schema(db: sqlite3.Connection) -> dict:
    """Table -> its columns (name, type, not null, default, key) and foreign keys."""
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                       "AND name != 'sqlite_sequence'")]
    return {t: (db.execute(f"PRAGMA table_info({t})").fetchall(),
                db.execute(f"PRAGMA foreign_key_list({t})").fetchall()) for t in sorted(tables)}


def test_migrations_build_the_tables_readers_and_writers_use(tmp_path):
    """A column added to a dictionary without a new migration (or the reverse) fails here."""
    live = sqlite3.connect(":memory:")
    for name, columns in {**TABLES, **INTERNAL_TABLES}.items():
        body = "".join(f", {col} {typ}" for col, typ in columns.items())
        live.execute(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY AUTOINCREMENT{body})")
    Store(tmp_path / "m.db").close()
    migrated = sqlite3.connect(tmp_path / "m.db")
    assert _schema(migrated) == _schema(live)
    triggers = {r[0] for r in migrated.execute("SELECT name FROM sqlite_master "
                                               "WHERE type = 'trigger'")}
    assert triggers == {f"{t}_no_{op}" for t in TABLES for op in ("update", "delete")}


def test_a_version_1_store_is_upgraded_in_place_with_its_rows(tmp_path):
    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.executescript(MIGRATIONS[0] + "\nPRAGMA user_version = 1;")
    old.execute("INSERT INTO trials (trial_key, status, recorded_at, source, model, throughput) "
                "VALUES ('t1', 'finished', '2026-01-01T00:00:00+00:00', 'local', 'resnet18', 11)")
    old.execute("INSERT INTO revocations (trial_id, cause, source) VALUES (1, 'sigkill', 'local')")
    old.commit()
    old.close()
    with Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION
        [trial] = store.rows("trials")
        assert (trial["id"], trial["model"], trial["throughput"]) == (1, "resnet18", 11.0)
        assert [r["cause"] for r in store.rows("revocations", {"trial_id": 1})] == ["sigkill"]
        store.add_rows("accuracy_curves", [{"run": "r", "step": 1, "accuracy": 0.5,
                                            "source": "test"}])
        store.add_trial(_trial(2))
    with Store(path) as again:  # upgraded once: reopening migrates nothing
        assert again.schema_version == SCHEMA_VERSION
        assert [r["trial_key"] for r in again.rows("trials")] == ["t1", "t2"]
        assert len(again.rows("accuracy_curves")) == 1


def test_append_only(tmp_path):
    with Store(tmp_path / "m.db") as store:
        store.add_trial(_trial(1))
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            store.query("DELETE FROM trials")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            store.query("UPDATE trials SET model = 'x'")


def test_unknown_column_is_refused(tmp_path):
    with Store(tmp_path / "m.db") as store, pytest.raises(StoreError, match="unknown column"):
        store.add_rows("trials", [{"nope": 1}])


def test_corrupt_file_gives_store_error(tmp_path):
    path = tmp_path / "bad.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a measurement store"):
        Store(path)


def _writer(path: str, start: int, count: int) -> None:
    with Store(path) as store:
        for i in range(start, start + count):
            store.add_trial(_trial(i), revocations=[{"node": 0}])


def test_parallel_writers_lose_nothing(tmp_path):
    path = str(tmp_path / "m.db")
    Store(path).close()
    procs = [multiprocessing.Process(target=_writer, args=(path, k * 100, 50)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with Store(path) as store:
        assert len(store.rows("trials")) == 200
        assert len(store.rows("revocations")) == 200
        assert len(store.finished_trial_keys("s")) == 200
