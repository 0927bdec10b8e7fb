"""Faults around the measurement store: an output flag pointed at a store, a file that is not
a store given as --store, an empty file, a read-only store, a full disk. The store (or the
other file) must come out byte for byte as it went in, with a one-line error."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys

import pytest
from fakes.aws import aws, client, moto_endpoint  # noqa: F401
from typer.testing import CliRunner

import advisor.cli as advisor_cli
import profiler.cli as profiler_cli
from gpuadvisor.store import Store, StoreError

for _name in profiler_cli.COMMAND_MODULES:
    __import__(f"profiler.cli.{_name}")
for _name in advisor_cli.COMMAND_MODULES:
    __import__(f"advisor.cli.{_name}")

runner = CliRunner()
TRIAL = {"trial_key": "k1", "sweep": "s", "status": "finished", "source": "local",
         "model": "resnet18", "nodes": 1, "throughput": 10.0}


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_line_error(result) -> str:
    text = result.output.strip()
    assert result.exit_code == 2, text
    assert "Traceback" not in text and len(text.splitlines()) == 1, text
    return text


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "runs.db"
    with Store(path) as opened:
        opened.add_trial(TRIAL)
    return path


def test_output_flags_refuse_to_overwrite_a_store(store, tmp_path):
    before = digest(store)
    runs = runner.invoke(profiler_cli.app, ["runs", "--store", str(store), "--format", "json",
                                            "-o", str(store)])
    assert "SQLite database" in one_line_error(runs)
    fit = runner.invoke(advisor_cli.app, ["fit", "--store", str(store), "-o", str(store)])
    assert "SQLite database" in one_line_error(fit)
    assert digest(store) == before
    with Store(store, readonly=True) as opened:
        assert len(opened.rows("trials")) == 1


def test_output_flags_replace_only_what_the_command_writes(store, tmp_path):
    notes = tmp_path / "notes.bin"
    notes.write_bytes(b"\x00\x01 not json")
    refused = runner.invoke(profiler_cli.app, ["runs", "--store", str(store), "--format",
                                               "json", "-o", str(notes)])
    assert "is not JSON" in one_line_error(refused)
    assert notes.read_bytes() == b"\x00\x01 not json"
    not_artifact = tmp_path / "list.json"
    not_artifact.write_text("[1, 2]")
    fit = runner.invoke(advisor_cli.app, ["fit", "--store", str(store), "-o",
                                          str(not_artifact)])
    assert "model artifact" in one_line_error(fit)
    earlier = tmp_path / "earlier.json"  # an earlier export of the same command: replaced
    earlier.write_text("[]")
    again = runner.invoke(profiler_cli.app, ["runs", "--store", str(store), "--format", "json",
                                             "-o", str(earlier)])
    assert again.exit_code == 0, again.output
    assert json.loads(earlier.read_text())[0]["trial_key"] == "k1"


def test_a_foreign_sqlite_file_is_never_written(tmp_path):
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE people (name TEXT)")
        db.execute("INSERT INTO people VALUES ('ada')")
    db.close()
    before = digest(other)
    for readonly in (False, True):
        with pytest.raises(StoreError, match="not a measurement store"):
            Store(other, readonly=readonly)
    runs = runner.invoke(profiler_cli.app, ["runs", "--store", str(other)])
    assert "not a measurement store" in one_line_error(runs)
    exported = tmp_path / "trials.json"
    exported.write_text("[]")
    imported = runner.invoke(advisor_cli.app, ["data", "import", "runs", str(exported),
                                               "--store", str(other)])
    assert "not a measurement store" in one_line_error(imported)
    assert digest(other) == before
    with sqlite3.connect(other) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master")]
    db.close()
    assert tables == ["people"]


def test_readers_never_turn_an_empty_file_into_a_store(tmp_path):
    empty = tmp_path / "empty.db"
    empty.touch()
    runs = runner.invoke(profiler_cli.app, ["runs", "--store", str(empty)])
    assert "no measurement store" in one_line_error(runs)
    fit = runner.invoke(advisor_cli.app, ["fit", "--store", str(empty), "-o",
                                          str(tmp_path / "a.json")])
    assert fit.exit_code != 0 and "Traceback" not in fit.output
    assert empty.stat().st_size == 0
    with pytest.raises(StoreError, match="no measurement store"):
        Store(empty, create=False)


def test_a_read_only_store_is_read_through_a_read_only_connection(store):
    store.chmod(0o444)
    before = digest(store)
    listed = runner.invoke(profiler_cli.app, ["runs", "--store", str(store), "--format", "json"])
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.output)[0]["trial_key"] == "k1"
    with Store(store, readonly=True) as opened:
        with pytest.raises(StoreError, match="read-only"):
            opened.add_trial(TRIAL)
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            opened._db.execute("INSERT INTO models (model, source) VALUES ('m', 'x')")
    assert digest(store) == before


def full_disk(store: Store) -> None:
    """SQLite's own SQLITE_FULL: the trials table's only page is filled and the file may not
    grow (PRAGMA max_page_count), as a store on a full disk."""
    store.add_trial({**TRIAL, "sweep": "filler", "extra": "x" * 3800})
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count={pages}")


def test_a_trial_that_cannot_be_stored_is_kept_in_the_sink_and_ingested_once(
        tmp_path, monkeypatch):
    from types import SimpleNamespace

    from test_orchestrator_polls import SPEC, Clock, CloudLike

    from cloud.sinks import open_sink
    from gpuadvisor.records import make
    from profiler import orchestrator
    from profiler.orchestrator import TrialRun
    from profiler.progress import SweepDisplay
    from profiler.spec import parse_spec

    spec = parse_spec({k: v for k, v in SPEC.items() if k != "revocation"})
    [trial] = spec.trials()
    results = f"file://{tmp_path / 'records'}"
    cluster = {}

    def nodes_write(pause: int, now: float) -> None:
        if pause == 1:
            sink = open_sink(results, cluster["name"])
            for node in (0, 1):
                sink.append(make("first_step", node=node, rank=node, restart=0, t=now - 3))
            sink.append(make("result", node=0, rank=0, restart=0, t=now, model="resnet18",
                             batch_per_gpu=8, precision="fp32", world_size=2, device="cpu",
                             throughput=50.0, steps_measured=40, stable=True))

    clock = Clock(nodes_write)
    monkeypatch.setattr(orchestrator, "time", SimpleNamespace(time=clock.time,
                                                              sleep=clock.sleep))
    path = tmp_path / "runs.db"
    with Store(path) as store:
        full_disk(store)
        run = TrialRun(spec, trial, CloudLike(clock), results, SweepDisplay(1, enabled=False))
        cluster["name"] = run.cluster.cluster
        with pytest.raises(StoreError) as failure:
            run.run(store)
    message = str(failure.value)
    assert "database or disk is full" in message and f"profiler ingest {results}" in message
    assert "\n" not in message
    with Store(path, readonly=True) as store:
        assert [t["sweep"] for t in store.rows("trials")] == ["filler"]

    first = runner.invoke(profiler_cli.app, ["ingest", results, "--store", str(path),
                                             "--format", "json"])
    assert first.exit_code == 0, first.output
    assert json.loads(first.output)["stored"] == [f"polls/{trial.key}"]
    again = runner.invoke(profiler_cli.app, ["ingest", results, "--store", str(path)])
    assert again.exit_code == 0 and "0 trial(s) stored, 1 already" in again.output
    with Store(path, readonly=True) as store:
        [stored] = store.rows("trials", {"sweep": "polls"})
        assert stored["status"] == "finished" and stored["throughput"] == 50.0
        assert len(store.rows("startups", {"trial_id": stored["id"]})) == 0
        assert store.finished_trial_keys("polls") == {trial.key}


def test_ingest_of_a_missing_sink_is_one_line(tmp_path):
    result = runner.invoke(profiler_cli.app, ["ingest", f"file://{tmp_path / 'none'}",
                                              "--store", str(tmp_path / "runs.db")])
    assert "no such directory" in one_line_error(result)


def test_one_run_owns_a_trial_until_it_releases_or_its_lease_lapses(tmp_path):
    with Store(tmp_path / "runs.db") as store:
        claim = dict(host="here", pid=os.getpid(), ttl_s=60.0)
        assert store.claim_trial("s", "k", "run-a", now=1000.0, **claim) is None
        held = store.claim_trial("s", "k", "run-b", now=1001.0, **claim)
        assert held["owner"] == "run-a" and held["expires_at"] == 1060.0
        assert store.claim_trial("s", "k", "run-a", now=1030.0, **claim) is None  # renewed
        assert store.claim_trial("s", "k", "run-b", now=1061.0, **claim)["owner"] == "run-a"
        assert store.claim_trial("s", "other", "run-b", now=1001.0, **claim) is None
        store.release_trial("s", "k", "run-b")  # not its lease: nothing happens
        assert store.claim_trial("s", "k", "run-b", now=1031.0, **claim)["owner"] == "run-a"
        store.release_trial("s", "k", "run-a")
        assert store.claim_trial("s", "k", "run-b", now=1031.0, **claim) is None
        # Lapsed: taken over.
        assert store.claim_trial("s", "k", "run-c", now=2000.0, **claim) is None


def test_a_lease_of_a_process_gone_from_this_host_is_taken_over(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with Store(tmp_path / "runs.db") as store:
        assert store.claim_trial("s", "k", "killed", host="here", pid=gone.pid, ttl_s=600,
                                 now=1000.0) is None
        assert store.claim_trial("s", "k", "elsewhere", host="there", pid=os.getpid(),
                                 ttl_s=600, now=1001.0)["owner"] == "killed"
        assert store.claim_trial("s", "k", "next", host="here", pid=os.getpid(), ttl_s=600,
                                 now=1001.0) is None


def test_a_bucket_sink_is_reingested_once(aws, tmp_path):
    from cloud.sinks import clusters, open_sink
    from gpuadvisor.records import make
    from profiler.reingest import reingest

    s3 = client(aws["endpoint"], "s3")
    s3.create_bucket(Bucket="results")
    rows = {"trial": {**TRIAL, "extra": {"attempt": "a1"}},
            "revocations": [{"node": 1, "cause": "interruption"}], "startups": [],
            "checkpoints": []}
    kept = open_sink("s3://results/runs", "s-k1", client=s3)
    kept.append(make("first_step", node=1, rank=1, restart=0))
    kept.append(make("trial", node=0, rank=None, restart=0, attempt="a1", rows=rows))
    open_sink("s3://results/runs", "s-k2", client=s3).append(
        make("agent_start", node=0, rank=None, restart=0))
    assert clusters("s3://results/runs", client=s3) == ["s-k1", "s-k2"]
    with Store(tmp_path / "runs.db") as store:
        done = reingest("s3://results/runs", store, client=s3)
        assert (done.stored, done.already, done.without_trial) == (["s/k1"], 0, ["s-k2"])
        again = reingest("s3://results/runs", store, client=s3)
        assert (again.stored, again.already) == ([], 1)
        [trial] = store.rows("trials")
        assert [r["cause"] for r in store.rows("revocations", {"trial_id": trial["id"]})] == [
            "interruption"]


def test_opening_a_current_store_writes_nothing(store, tmp_path):
    before = digest(store)
    with Store(store) as opened:
        assert len(opened.rows("trials")) == 1
    assert digest(store) == before
    assert not store.with_name(store.name + "-wal").exists()


def _open_new_store(path: str, results) -> None:
    try:
        with Store(path):
            results.put("ok")
    except StoreError as exc:
        results.put(str(exc))


def test_processes_creating_one_store_at_once_all_open_it(tmp_path):
    """Two sweeps of one spec start together on a store that does not exist yet: each must
    see it either before or after the other's migration (it was refused as 'not a measurement
    store' when one read the version before, and the tables after, the other's commit)."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    for attempt in range(20):
        path, results = str(tmp_path / f"runs{attempt}.db"), context.Queue()
        workers = [context.Process(target=_open_new_store, args=(path, results))
                   for _ in range(3)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        assert [results.get(timeout=10) for _ in workers] == ["ok"] * 3
