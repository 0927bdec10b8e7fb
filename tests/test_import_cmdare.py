"""CM-DARE import: directory-name rule, row counts per table, per-run figures, idempotency,
bad input. Row counts were checked by hand against ../shared/reference/cmdare:

- trials 80 = speed_data/0latency_data.csv: 12 models x 2 GPUs (24)
            + speed_data_base: 8 run folders + speed_and_cluster_size: 3 x 16 run folders
- models 20 = the 20 model names of checkpoint/whole_data.csv (speed_data's 12 among them)
- checkpoints 200 = 100 rows of whole_data.csv x (local, bucket)
- startups 100 = 14 + 17 + 15 + 9 + 12 + 15 + 10 + 8 rows of the 8 start-up files
- accuracy_curves 63 = 9 chief_rejoining files x 7 rows
"""

import csv
import shutil
import statistics
import subprocess
import sys

import pytest

from advisor.importers import ImportDataError
from advisor.importers.cmdare import import_cmdare
from advisor.importers.cmdare_names import canonical_model, parse_run_name
from gpuadvisor.store import Store

EXPECTED = {"trials": 80, "models": 20, "checkpoints": 200, "startups": 100,
            "accuracy_curves": 63}


@pytest.mark.parametrize("name, parent, expected", [
    ("res32p100worker8", "p100", ("res32", "P100", None, 8)),
    ("shakebigv100ps2worker4", "v100ps2", ("shakebig", "V100", 2, 4)),
    ("res15p100ps2worker4", "p100ps2", ("res15", "P100", 2, 4)),
    ("shakesmall80worker3", "k80", ("shakesmall", "K80", None, 3)),
    ("shakesmall100worker3", "p100", ("shakesmall", "P100", None, 3)),
    ("res56v100worker5", "v100", ("res56", "V100", None, 5)),
    ("res44k80worker1", "k80", ("res44", "K80", None, 1)),
    ("custom10100worker2", "p100", ("custom10", "P100", None, 2)),  # custom10 on '100'
    ("shake80k80worker7", "k80", ("shake80", "K80", None, 7)),
    ("shake8080worker7", "k80", ("shake80", "K80", None, 7)),  # shake80 on '80'
    ("shakesmallp100ps2worker8", "p100ps2", ("shakesmall", "P100", 2, 8)),
    ("res32k80", "speed_data_base", ("res32", "K80", None, None)),
    ("shakebigv100", None, ("shakebig", "V100", None, None)),
])
def test_run_names_parse_by_rule(name, parent, expected):
    run = parse_run_name(name, parent)
    assert (run.model, run.gpu, run.ps_count, run.workers) == expected


@pytest.mark.parametrize("name, parent", [("res15", None), ("worker3", "k80"), ("", "p100"),
                                          ("res15x99worker2", None)])
def test_run_names_that_break_the_rule_are_refused(name, parent):
    with pytest.raises(ValueError, match="is not <model><gpu>"):
        parse_run_name(name, parent)


def test_model_names_from_every_file_meet():
    assert {canonical_model(n) for n in ("ResNet-15", "Res15", "res15")} == {"res15"}
    assert canonical_model("Custom ResNet 10") == "custom10"
    assert canonical_model("Shake Large") == canonical_model("shakebig") == "shakebig"


@pytest.fixture
def cmdare(reference):
    return reference / "cmdare"


def test_import_counts_and_figures(cmdare, tmp_path):
    with Store(tmp_path / "m.db") as store:
        result = import_cmdare(cmdare, store)
        assert result.rows == EXPECTED and not result.skipped
        for table, count in EXPECTED.items():
            rows = store.rows(table)
            assert len(rows) == count
            assert {r["source"] for r in rows} == {"import:cmdare"}

        trials = store.rows("trials")
        assert {(t["provider"], t["sync"], t["gpus_per_node"], t["batch_per_gpu"])
                for t in trials} == {("gcp", "ps", 1, 128)}
        shapes = {(t["gpu_type"], t["ps_count"], t["nodes"]) for t in trials
                  if t["extra"]["dataset"] == "speed_and_cluster_size"}
        assert shapes == {(g, p, n) for g, p in (("K80", 1), ("P100", 1), ("P100", 2))
                          for n in range(1, 9)}

        # speed_data rows: no warm-up to skip, so the median of the published speeds x 128
        with open(cmdare / "speed_data" / "0latency_data.csv", newline="") as handle:
            speeds = [float(r["Speed (steps/sec)"]) for r in csv.DictReader(handle)
                      if r["Model (temp)"] == "Res15" and r["GPU (temp)"] == "K80"]
        (res15,) = [t for t in trials if t["extra"]["dataset"] == "speed_data"
                    and t["model"] == "res15" and t["gpu_type"] == "K80"]
        assert res15["throughput"] == pytest.approx(statistics.median(speeds) * 128)
        assert res15["throughput_lo"] is None and res15["throughput_hi"] is None  # no CI
        spread = res15["extra"]["throughput_p2_5"], res15["extra"]["throughput_p97_5"]
        assert spread[0] <= res15["throughput"] <= spread[1]
        assert res15["step_time_median"] == pytest.approx(1 / statistics.median(speeds))

        # asynchronous PS: global steps/s counts every worker's step, so 8 K80 workers train
        # shakesmall ~8x as fast as one (not 64x)
        def cluster(model, gpu, nodes):
            (trial,) = [t for t in trials if t["extra"]["dataset"] == "speed_and_cluster_size"
                        and (t["model"], t["gpu_type"], t["nodes"], t["ps_count"])
                        == (model, gpu, nodes, 1)]
            return trial

        ratio = cluster("shakesmall", "K80", 8)["throughput"] / cluster("shakesmall", "K80", 1)[
            "throughput"]
        assert 6 < ratio < 8.5
        eight = cluster("res15", "K80", 8)
        assert eight["warmup_steps"] > 101  # the ramp while workers join is skipped
        assert eight["step_time_median"] == pytest.approx(8 * 128 / eight["throughput"])

        models = {m["model"]: m for m in store.rows("models")}
        assert models["res15"]["params"] == 693818
        assert models["res15"]["gradient_bytes"] == 4 * 693818
        assert models["res15"]["flops_per_sample"] == 630989589
        assert (models["custom3"]["params"] == 1451706
                and models["custom3"]["flops_per_sample"] is None)

        local = [c for c in store.rows("checkpoints") if c["target"] == "local"]
        assert len(local) == 100 and {c["model"] for c in local} == set(models)
        spot = [s for s in store.rows("startups") if s["spot"]]
        assert len(spot) == 12 + 15 + 10 + 8
        rejoin = store.rows("accuracy_curves", {"run": "exp-6000"})
        assert [r["step"] for r in rejoin][-1] == 24001
        assert {r["revoked_at_step"] for r in rejoin} == {6000}


def test_import_is_idempotent_and_sees_changed_data(cmdare, tmp_path):
    copy = tmp_path / "processed_data"
    shutil.copytree(cmdare, copy)
    with Store(tmp_path / "m.db") as store:
        first = import_cmdare(tmp_path, store)  # a folder holding processed_data/ works too
        again = import_cmdare(copy, store)
        assert again.already_imported and again.fingerprint == first.fingerprint
        assert len(store.rows("trials")) == EXPECTED["trials"]

        # a file that breaks the layout is skipped with its reason; the rest is new data
        (copy / "chief_rejoining" / "notes.csv").write_text("a,b\n1,2\n")
        changed = import_cmdare(copy, store)
        assert not changed.already_imported
        assert any("notes.csv" in reason for reason in changed.skipped)
        assert len(store.rows("trials")) == 2 * EXPECTED["trials"]


def test_bad_paths_are_refused(tmp_path):
    with Store(tmp_path / "m.db") as store:
        with pytest.raises(ImportDataError, match="does not exist"):
            import_cmdare(tmp_path / "nowhere", store)
        with pytest.raises(ImportDataError, match="expected folders speed_data"):
            import_cmdare(tmp_path, store)
        (tmp_path / "speed_data").mkdir()
        with pytest.raises(ImportDataError, match="no CSV files"):
            import_cmdare(tmp_path, store)


def test_cli_one_line_error_and_json(cmdare, tmp_path):
    cli = [sys.executable, "-c", "from advisor.cli import main; main()", "data", "import"]
    bad = subprocess.run(cli + ["cmdare", str(tmp_path), "--store", str(tmp_path / "m.db")],
                         check=False, capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().startswith("error:") and len(bad.stderr.strip().splitlines()) == 1

    good = subprocess.run(cli + ["cmdare", str(cmdare), "--store", str(tmp_path / "m.db"),
                                 "--format", "json"], check=False, capture_output=True, text=True)
    assert good.returncode == 0, good.stderr
    import json

    assert json.loads(good.stdout)["rows"] == EXPECTED
