import csv
import io
import json

import pytest
from typer.testing import CliRunner

from gpuadvisor.store import TRIAL_COLUMNS, Store
from profiler.cli import COMMAND_MODULES, app

for _name in COMMAND_MODULES:  # register every command, as the console script does
    __import__(f"profiler.cli.{_name}")

runner = CliRunner()

FINISHED = {
    "trial_key": "resnet18-2x1", "sweep": "smoke", "status": "finished", "source": "local",
    "provider": "local", "nodes": 2, "gpus_per_node": 1, "model": "resnet18",
    "batch_per_gpu": 32, "precision": "fp32", "throughput": 123.4, "throughput_lo": 120.0,
    "throughput_hi": 127.0, "step_time_median": 0.52, "step_time_p95": 0.61,
    "time_to_first_step": 4.2, "checkpoint_save_s": 0.31, "checkpoint_restore_s": 0.12,
    "software": {"torch": "2.13.0"},
}
FAILED = {
    "trial_key": "resnet50-4x1", "sweep": "gcp-v100", "status": "failed", "error": "quota",
    "source": "gcp", "provider": "gcp", "nodes": 4, "gpus_per_node": 1, "gpu_type": "V100",
    "model": "resnet50", "batch_per_gpu": 128, "precision": "amp",
}


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "runs.db"
    with Store(path) as opened:
        opened.add_trial(
            FINISHED,
            revocations=[{"node": 1, "cause": "sigkill", "at_seconds": 10.0,
                          "first_step_after_s": 6.5, "steps_lost": 3}],
            startups=[{"node": 0, "first_step_s": 4.2}, {"node": 1, "first_step_s": 4.4}],
            checkpoints=[{"model": "resnet18", "bytes": 46_000_000, "target": "local",
                          "save_s": 0.31, "restore_s": 0.12}])
        opened.add_trial(FAILED)
    return path


def invoke(*args):
    return runner.invoke(app, ["runs", *map(str, args)])


def test_table_lists_every_trial_with_its_figures(store):
    result = invoke("--store", store)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "resnet" in line]
    assert len(lines) == 2
    first = lines[0]
    for cell in ("smoke", "2x1 cpu", "fp32", "123.4", "120.0-127.0", "520/610", "4.2",
                 "0.31/0.12", "finished"):
        assert cell in first
    assert "4x1xV100" in lines[1] and "failed" in lines[1]


def test_filters_by_sweep_and_model(store):
    result = invoke("--store", store, "--sweep", "gcp-v100", "--format", "json")
    assert [t["model"] for t in json.loads(result.output)] == ["resnet50"]
    result = invoke("--store", store, "--model", "resnet18", "--format", "json")
    assert [t["sweep"] for t in json.loads(result.output)] == ["smoke"]
    result = invoke("--store", store, "--model", "gpt2", "--format", "json")
    assert json.loads(result.output) == []


def test_json_is_the_exchange_form(store):
    trials = json.loads(invoke("--store", store, "--format", "json").output)
    assert len(trials) == 2
    first = trials[0]
    assert set(TRIAL_COLUMNS) | {"id", "revocations", "startups", "checkpoints"} == set(first)
    assert first["software"] == {"torch": "2.13.0"}
    assert [r["steps_lost"] for r in first["revocations"]] == [3]
    assert [s["first_step_s"] for s in first["startups"]] == [4.2, 4.4]
    assert first["checkpoints"][0]["bytes"] == 46_000_000
    assert trials[1]["revocations"] == [] and trials[1]["error"] == "quota"


def test_json_round_trips_through_the_importer(store, tmp_path):
    from advisor.importers.runs import import_runs

    exported = tmp_path / "runs.json"
    assert invoke("--store", store, "--format", "json", "--output", exported).exit_code == 0
    with Store(tmp_path / "copy.db") as copy:
        import_runs(exported, copy)
        assert len(copy.rows("trials")) == 2 and len(copy.rows("startups")) == 2
    again = json.loads(invoke("--store", tmp_path / "copy.db", "--format", "json").output)
    original = json.loads(exported.read_text())
    assert [t["throughput"] for t in again] == [t["throughput"] for t in original]


def test_csv_is_flat_trials(store):
    result = invoke("--store", store, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(result.output)))
    assert [r["model"] for r in rows] == ["resnet18", "resnet50"]
    assert rows[0]["revocation_count"] == "1" and rows[1]["revocation_count"] == "0"
    assert json.loads(rows[0]["software"]) == {"torch": "2.13.0"}


def test_parquet_needs_an_output_file_and_writes_one(store, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    missing = invoke("--store", store, "--format", "parquet")
    assert missing.exit_code == 2 and "--output" in missing.output
    target = tmp_path / "trials.parquet"
    assert invoke("--store", store, "--format", "parquet", "-o", target).exit_code == 0
    frame = pd.read_parquet(target)
    assert list(frame["model"]) == ["resnet18", "resnet50"]
    assert list(frame["revocation_count"]) == [1, 0]


def test_show_gives_one_trial_with_its_child_rows(store):
    result = invoke("--store", store, "--show", 1)
    assert result.exit_code == 0, result.output
    for title in ("trial 1", "revocations", "startups", "checkpoints", "sigkill"):
        assert title in result.output
    shown = json.loads(invoke("--store", store, "--show", 2, "--format", "json").output)
    assert [t["trial_key"] for t in shown] == ["resnet50-4x1"]


def test_unknown_trial_is_a_one_line_error(store):
    result = invoke("--store", store, "--show", 99)
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "no trial 99" in result.output


def test_missing_store_is_an_error_and_is_not_created(tmp_path):
    path = tmp_path / "absent.db"
    result = invoke("--store", path)
    assert result.exit_code == 2 and "no measurement store" in result.output
    assert not path.exists()


def test_corrupt_store_is_a_one_line_error(tmp_path):
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    result = invoke("--store", path)
    assert result.exit_code == 2 and "not a measurement store" in result.output
    assert "Traceback" not in result.output
