"""Exchange JSON (docs/interfaces.md) -> store: round trip, idempotency, bad files."""

import json

import pytest
from typer.testing import CliRunner

from advisor.importers import ImportDataError
from advisor.importers.runs import import_runs
from gpuadvisor.store import Store

CHILD_TABLES = ("revocations", "startups", "checkpoints")


def exchange(store: Store) -> list[dict]:
    """The exchange form: every trials column plus id, and child rows as lists."""
    return [
        {**trial, **{t: store.rows(t, {"trial_id": trial["id"]}) for t in CHILD_TABLES}}
        for trial in store.rows("trials")
    ]


@pytest.fixture
def source_store(tmp_path):
    with Store(tmp_path / "a.db") as store:
        base = {"sweep": "s1", "status": "finished", "source": "local", "provider": "local",
                "nodes": 2, "gpus_per_node": 1, "sync": "allreduce", "model": "resnet18",
                "batch_per_gpu": 32, "precision": "fp32", "throughput": 123.5,
                "software": {"torch": "2.13.0"}, "extra": {"note": "x"}}
        store.add_trial(
            {**base, "trial_key": "t1"},
            revocations=[{"node": 1, "cause": "sigkill", "at_seconds": 12.5, "notice_s": 0.0,
                          "first_step_after_s": 4.25, "steps_lost": 3}],
            startups=[{"node": 0, "provider": "local", "first_step_s": 1.5}],
            checkpoints=[{"model": "resnet18", "bytes": 1000, "target": "local",
                          "save_s": 0.1}],
        )
        store.add_trial({**base, "trial_key": "t2", "status": "failed", "error": "oom",
                         "throughput": None})
        yield store


def _strip(rows, *drop):
    return [{k: v for k, v in r.items() if k not in ("id", "trial_id", *drop)} for r in rows]


def test_round_trip(source_store, tmp_path):
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(exchange(source_store)))
    with Store(tmp_path / "b.db") as target:
        result = import_runs(path, target)
        assert result.rows == {"trials": 2, "revocations": 1, "startups": 1, "checkpoints": 1}
        assert _strip(target.rows("trials")) == _strip(source_store.rows("trials"))
        for table in CHILD_TABLES:
            assert _strip(target.rows(table)) == _strip(source_store.rows(table))
        (t1,) = target.rows("trials", {"trial_key": "t1"})
        (revocation,) = target.rows("revocations")
        assert revocation["trial_id"] == t1["id"] and revocation["source"] == "local"


def test_import_is_idempotent(source_store, tmp_path):
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(exchange(source_store)))
    again = import_runs(path, source_store)  # into the store it came from: nothing new
    assert again.already_imported and again.rows["trials"] == 0 and len(again.skipped) == 2
    assert len(source_store.rows("trials")) == 2 and len(source_store.rows("revocations")) == 1


@pytest.mark.parametrize("content, message", [
    ("not json", "is not JSON"),
    ('{"trial_key": "x"}', "not a list of trials"),
    ("[1]", "trial 0 is not a JSON object"),
    (('[{"trial_key": "x", "status": "finished", "recorded_at": "now", "source": "local", '
      '"colour": "red"}]'), "colour: Extra inputs are not permitted"),
    ('[{"status": "finished", "recorded_at": "now", "source": "local"}]',
     "trial_key: Field required"),
    (('[{"trial_key": "x", "status": "finished", "recorded_at": "now", "source": "local", '
      '"nodes": "two"}]'), "nodes: Input should be a valid integer"),
    (('[{"trial_key": "x", "status": "finished", "recorded_at": "now", "source": "local", '
      '"revocations": {"node": 1}}]'), "revocations is not a list"),
])
def test_bad_files_are_refused(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with Store(tmp_path / "m.db") as store:
        with pytest.raises(ImportDataError, match=message):
            import_runs(path, store)
        assert store.rows("trials") == []


def test_cli(source_store, tmp_path):
    import advisor.cli.data  # noqa: F401  (registers `advisor data`)
    from advisor.cli.app import app

    path = tmp_path / "runs.json"
    path.write_text(json.dumps(exchange(source_store)))
    store = str(tmp_path / "c.db")
    runner = CliRunner()
    ok = runner.invoke(app, ["data", "import", "runs", str(path), "--store", store,
                             "--format", "json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["rows"]["trials"] == 2
    missing = runner.invoke(app, ["data", "import", "runs", str(tmp_path / "no.json"),
                                  "--store", store])
    assert missing.exit_code == 2 and "is not a file" in missing.stderr


def test_a_run_of_an_implementation_its_card_no_longer_describes_is_left_out(tmp_path):
    """The shipped H200 GNMT trial ran the zoo's written-out LSTM, not the cuDNN kernels its
    card prices: imported with its mark, the fit leaves it out and says why."""
    from advisor.fitting import throughput_data
    from gpuadvisor import data

    with Store(tmp_path / "s.db") as store:
        import_runs(data.shipped("measurements") / "h200.json", store)
    with Store(tmp_path / "s.db", readonly=True) as store:
        features, _, _, skipped = throughput_data(store)
    assert skipped["ran an implementation its card no longer describes (extra.suspect)"] == 1
    assert "gnmt_v2" not in set(features["model"]) and "bert_base" in set(features["model"])


def test_a_measured_answer_from_this_projects_runs_names_them_and_their_torch(tmp_path):
    """`fitting.measured_evidence` words a profiler run's stack as whose runs they are and the
    torch they ran, and keys every configuration the runs measured."""
    from advisor.artifact import config_keys
    from advisor.fitting import measured_evidence, stack_words, throughput_data
    from gpuadvisor import data

    with Store(tmp_path / "s.db") as store:
        import_runs(data.shipped("measurements") / "h200.json", store)
    with Store(tmp_path / "s.db", readonly=True) as store:
        features, _, measured, _ = throughput_data(store)
    words, evidence = measured_evidence(features)
    assert words == ["local runs (torch 2.11.0+cu130)"]
    assert set(evidence) == set(measured) == set(config_keys(features).tolist())
    assert all(indices == [0] for indices in evidence.values())
    assert stack_words("cmdare not-json") == "cmdare not-json"
    assert stack_words('published {"framework": "TensorFlow"}') == \
        "published runs (framework TensorFlow)"
