import multiprocessing
import sqlite3

import pytest

from gpuadvisor.store import SCHEMA_VERSION, Store, StoreError


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
