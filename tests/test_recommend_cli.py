"""`advisor recommend` end to end on the shipped cards, catalog and fitted artifact."""

from __future__ import annotations

import csv
import importlib
import io
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from advisor.artifact import SCHEMA_VERSION
from advisor.cli import COMMAND_MODULES
from advisor.cli.app import app

ROOT = Path(__file__).resolve().parent.parent

for _name in COMMAND_MODULES:
    importlib.import_module(f"advisor.cli.{_name}")


def recommend(*args: str):
    return CliRunner().invoke(app, ["recommend", *args])


def as_json(*args: str) -> dict:
    result = recommend(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_deadline_mode_picks_the_cheapest_plan_meeting_the_deadline():
    out = as_json("--model", "resnet50", "--deadline", "2d", "--top", "100000")
    plans = out["plans"]
    assert out["pick"] == plans[0] and out["pick"]["rank"] == 1
    assert all(p["time_at_confidence_s"] <= 2 * 86400 for p in plans)
    costs = [p["cost_at_confidence"] for p in plans]
    assert costs == sorted(costs)
    # Every candidate is either among the plans or counted as missing the deadline.
    explained = as_json("--model", "resnet50", "--deadline", "2d", "--explain")["explain"]
    missed = sum(cut["count"] for cut in explained["filtered"]
                 if cut["reason"] in ("misses_deadline", "never_finishes"))
    assert len(plans) + missed == out["catalog"]["candidates"]


def test_budget_mode_picks_the_fastest_plan_within_budget():
    plans = as_json("--model", "resnet50", "--budget", "200", "--top", "100000")["plans"]
    assert all(p["cost_at_confidence"] <= 200 for p in plans)
    times = [p["time_at_confidence_s"] for p in plans]
    assert times == sorted(times)


def test_both_constraints_and_filters():
    out = as_json("--model", "bert-base", "--deadline", "10d", "--budget", "5000",
                  "--provider", "aws",
                  "--gpu", "a100,v100", "--confidence", "0.8", "--top", "100000")
    assert {p["provider"] for p in out["plans"]} == {"aws"}
    assert {p["gpu"].split("-")[0] for p in out["plans"]} <= {"A100", "V100"}
    for p in out["plans"]:
        assert p["time_at_confidence_s"] <= 10 * 86400 and p["cost_at_confidence"] <= 5000
        assert p["p_deadline"] >= 0.8 and p["p_budget"] >= 0.8
    assert out["workload"]["model"] == "bert_base"
    assert out["constraints"] == {"deadline_s": 864000.0, "budget_usd": 5000.0,
                                  "confidence": 0.8}


def test_the_model_may_also_be_named_without_model():
    assert as_json("resnet18", "--deadline", "24h") == as_json("--model", "resnet18",
                                                               "--deadline", "24h")


def test_json_schema():
    out = as_json("--model", "resnet18", "--deadline", "24h", "--top", "3")
    assert set(out) == {"pick", "plans", "workload", "constraints", "assumptions", "catalog",
                        "artifact"}
    assert out["artifact"]["schema_version"] == SCHEMA_VERSION
    assert len(out["plans"]) == 3
    plan = out["pick"]
    for key in ("provider", "region", "instance_type", "gpu", "gpus_per_node", "nodes",
                "market", "throughput", "throughput_lo", "throughput_hi", "time_p50_s",
                "time_p90_s", "cost_p50", "cost_p90", "p_deadline", "provenance"):
        assert key in plan
    assert plan["market"] in ("spot", "on-demand")
    assert plan["provenance"] in ("measured", "interpolated", "extrapolated")
    assert plan["throughput_lo"] <= plan["throughput"] <= plan["throughput_hi"]
    assert plan["time_p50_s"] <= plan["time_p90_s"] and plan["cost_p50"] <= plan["cost_p90"]
    assert out["catalog"]["as_of"][:2] == "20"
    assert out["workload"]["epochs"] == 90


def test_table_and_csv():
    table = recommend("--model", "resnet18", "--deadline", "24h", "--top", "4")
    assert table.exit_code == 0 and "P(dl)" in table.stdout and "*1" in table.stdout
    rows = list(csv.DictReader(io.StringIO(
        recommend("--model", "resnet18", "--deadline", "24h", "--top", "4",
                  "--format", "csv").stdout)))
    assert len(rows) == 4 and rows[0]["rank"] == "1" and float(rows[0]["cost_p50"]) > 0
    header = recommend("--model", "resnet18", "--deadline", "24h",
                       "--format", "csv").stdout.splitlines()[0]
    assert header.split(",").count("rank") == 1


def test_explain_reports_scaling_risk_and_filters():
    out = as_json("--model", "resnet50", "--deadline", "12h", "--gpu", "T4,A100", "--explain")
    explained = out["explain"]
    assert [s["nodes"] for s in explained["scaling"]] == list(range(1, 9))
    assert explained["scaling"][0]["marginal_efficiency"] is None
    assert cuts(explained)["gpu_filter"]["count"] > 0
    assert explained["revocation_risk"]["market"] == out["pick"]["market"]
    text = recommend("--model", "resnet50", "--deadline", "12h", "--explain").stdout
    assert "Scaling of the pick" in text and "Filtered out" in text


def test_explain_says_whose_measurement_a_measured_pick_is():
    """One V100 at NVIDIA's FP32 recipe batch is a configuration its PyTorch code measured (and
    MXNet's and TensorFlow's): the pick says so, and whose figures its samples/s are."""
    job = ("--model", "resnet50", "--deadline", "30d", "--gpu", "V100", "--batch-size", "128",
           "--global-batch", "128", "--max-gpus", "1", "--explain")
    out = as_json(*job)
    assert out["pick"]["provenance"] == "measured"
    assert out["explain"]["measured_by"] == ("NVIDIA/DeepLearningExamples "
                                             "PyTorch/Classification/ConvNets in the "
                                             "pytorch-20.06 container")
    text = " ".join(recommend(*job).stdout.split())
    assert "The pick's configuration was measured: its samples/s are the median of the " \
           "figures of NVIDIA/DeepLearningExamples PyTorch/Classification/ConvNets" in text
    unmeasured = as_json("--model", "resnet50", "--deadline", "12h", "--explain")
    assert unmeasured["pick"]["provenance"] != "measured"
    assert unmeasured["explain"]["measured_by"] is None


def cuts(explained: dict) -> dict:
    return {cut["reason"]: cut for cut in explained["filtered"]}


def test_small_gpus_get_a_remedy_that_fits_instead_of_a_refusal():
    # gpt2_medium trains 64 sequences of 1024 tokens per step; a T4 holds one or two at fp32.
    out = as_json("--model", "gpt2_medium", "--deadline", "400d", "--gpu", "T4", "--top", "50")
    assert out["workload"]["global_batch"] == 64
    for plan in out["plans"]:
        assert plan["memory_mib"] <= plan["gpu_memory_mib"] == 15_360
        workers = plan["nodes"] * plan["gpus_per_node"]
        assert plan["micro_batch"] * plan["accumulation"] * workers == plan["global_batch"]
    assert {p["remedy"] for p in out["plans"]} & {"checkpointing", "fsdp", "accumulation"}
    assert "memory" not in {cut["reason"] for cut in as_json(
        "--model", "gpt2_medium", "--deadline", "400d", "--explain")["explain"]["filtered"]}


def write_card(home: Path, **values) -> None:
    """A user model card (the shipped header, gpt2's row with `values` over it)."""
    from gpuadvisor import data

    with open(data.shipped("model_cards.csv"), newline="") as handle:
        rows = list(csv.DictReader(handle))
    row = {**next(r for r in rows if r["model"] == "gpt2"), **values}
    with open(home / "model_cards.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerow(row)


def test_a_model_no_cluster_holds_exits_1_naming_the_need_in_mib(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUADVISOR_HOME", str(tmp_path))
    write_card(tmp_path, model="giant_lm", params="400000000000",
               gradient_bytes="1600000000000",
               tensors="900")
    result = recommend("--model", "giant_lm", "--deadline", "60d", "--max-nodes", "1")
    assert result.exit_code == 1
    assert "needs" in result.stderr and "MiB per GPU even at micro-batch 1" in result.stderr
    assert "largest GPU has 183,359 MiB" in result.stderr and "--max-nodes" in result.stderr


def test_nothing_meets_the_deadline_exits_1_with_one_sentence():
    result = recommend("--model", "gpt2_medium", "--deadline", "10m")
    assert result.exit_code == 1
    message = result.stderr.strip().splitlines()[-1]
    assert "no plan meets the 10m deadline" in message
    assert "the fastest is" in message and "the cheapest is" in message
    assert "Traceback" not in result.output
    # fp32, the default, leaves matrix products off the tensor cores: the sentence says so.
    assert message.endswith("--precision bf16 or amp (autocast to 16 bits) may meet it")
    bf16 = recommend("--model", "gpt2_medium", "--deadline", "10m", "--precision", "bf16")
    assert bf16.exit_code == 1 and "autocast" not in bf16.stderr


def test_plot_writes_a_png(tmp_path):
    path = tmp_path / "frontier.png"
    assert recommend("--model", "resnet18", "--deadline", "24h", "--plot", str(path)).exit_code == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_optimizer_is_the_recipes_unless_given():
    """ResNet-50's recipe steps SGD; asked for LAMB, each GPU holds and each update moves its
    two moments, so no plan runs faster."""
    recipe = as_json("--model", "resnet50", "--deadline", "2d", "--gpu", "A100")
    lamb = as_json("--model", "resnet50", "--deadline", "2d", "--gpu", "A100",
                   "--optimizer", "LAMB")
    assert (recipe["workload"]["optimizer"], lamb["workload"]["optimizer"]) == ("sgd", "lamb")
    speed = {(p["instance_type"], p["nodes"], p["market"], p["region"]): p["throughput"]
             for p in recipe["plans"]}
    shared = [(speed[k], p["throughput"]) for p in lamb["plans"]
              if (k := (p["instance_type"], p["nodes"], p["market"], p["region"])) in speed]
    assert shared and all(slower <= faster for faster, slower in shared)


@pytest.mark.parametrize("args, message", [
    (["resnt50", "--deadline", "24h"], "unknown model 'resnt50'; closest: resnet50"),
    (["--model", "resnet50", "--deadline", "24x"], "deadline '24x' is not understood"),
    (["--model", "resnet50", "--deadline", "-3h"], "90m, 24h, 2d, 1d12h"),
    (["--model", "resnet50", "--budget", "0"], "positive amount of US dollars"),
    (["--model", "resnet50", "--budget", "-20"], "positive amount of US dollars"),
    (["--model", "resnet50"], "give --deadline"),
    (["--deadline", "1d"], "give the model to train with --model, one of: resnet18, "),
    (["--model", "resnet50", "resnet18", "--deadline", "1d"], "two models given"),
    (["--model", "resnet50", "--deadline", "1d", "--provider", "azure"], "unknown provider azure"),
    (["--model", "resnet50", "--deadline", "1d", "--region", "mars-1"], "unknown region mars-1"),
    (["--model", "resnet50", "--deadline", "1d", "--gpu", "B300"],
     "unknown GPU B300; the catalog has"),
    (["--model", "resnet50", "--deadline", "1d", "--precision", "fp8"],
     "precision 'fp8' is not known; use one of fp32, tf32, amp, bf16"),
    (["--model", "resnet50", "--deadline", "1d", "--optimizer", "adagrad"],
     "unknown --optimizer 'adagrad'; one of sgd, adamw, adam, lamb, rmsprop"),
    (["--model", "resnet50", "--deadline", "1d", "--epochs", "0"], "--epochs must be positive"),
    (["--model", "resnet50", "--deadline", "1d", "--steps", "100", "--epochs", "3"],
     "either --steps"),
    (["--model", "resnet50", "--deadline", "1d", "--confidence", "1.5"],
     "--confidence must lie between"),
    (["--model", "resnet50", "--deadline", "1d", "--max-nodes", "0"],
     "--max-nodes must be at least 1"),
    (["--model", "resnet50", "--deadline", "1d", "--artifact", "/nonexistent.json"], "advisor fit"),
])
def test_bad_input_exits_2_with_one_line(args, message):
    result = recommend(*args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 or "warning" in result.stderr
    assert "Traceback" not in result.output


def test_a_catalog_file_of_ones_own_is_used(tmp_path):
    shipped = (ROOT / "datasets" / "catalog_aws.csv").read_text().splitlines()
    header, rows = shipped[0], [r for r in shipped[1:] if ",g5.xlarge," in r]
    path = tmp_path / "mine.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    out = as_json("--model", "resnet18", "--deadline", "3d", "--catalog", str(path),
                  "--top", "1000")
    assert {p["instance_type"] for p in out["plans"]} == {"g5.xlarge"}


@pytest.mark.parametrize("flag, content, message", [
    ("--catalog", "provider,region\naws,us-east-1\n", "missing columns"),
    ("--artifact", "{", "not valid JSON"),
])
def test_corrupt_input_files_exit_2_with_one_line(tmp_path, flag, content, message):
    path = tmp_path / "broken"
    path.write_text(content)
    result = recommend("--model", "resnet18", "--deadline", "3d", flag, str(path))
    assert result.exit_code == 2 and message in result.stderr
    assert "Traceback" not in result.output


def test_the_table_says_when_larger_steps_would_help():
    """Without --explain, one line when most of the pick's step does not grow with the batch
    (BERT-base's 1M steps on 56 GPUs), none when it does (ResNet-50 on one node)."""
    bert = recommend("--model", "bert_base", "--deadline", "14h", "--provider", "gcp",
                     "--precision", "bf16", "--top", "1")
    assert bert.exit_code == 0 and "a larger --global-batch" in " ".join(bert.stdout.split())
    resnet = recommend("--model", "resnet50", "--deadline", "24h", "--top", "1")
    assert resnet.exit_code == 0 and "--global-batch" not in resnet.stdout


def test_samples_and_steps_take_counts_as_people_write_them():
    """ImageNet's 1,281,167 images as 1.28M, 90,000 steps as 90k: the same plans as the
    digits; a count that is not one is a usage error naming the flag and the forms."""
    def workload(*args):
        return as_json("--model", "resnet50", "--deadline", "3d", "--top", "1", *args)["workload"]

    assert workload("--samples", "1.28M")["samples_per_epoch"] == 1_280_000
    assert workload("--samples", "1.28M") == workload("--samples", "1280000")
    assert workload("--steps", "90k")["steps"] == 90_000
    result = recommend("--model", "resnet50", "--deadline", "3d", "--samples", "1.2X")
    assert result.exit_code == 2 and "samples must be a count such as" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("policy", ["fixed-global", "fixed-per-gpu"])
def test_steps_mean_the_same_data_on_every_cluster(policy):
    out = as_json("--model", "resnet18", "--steps", "5000", "--global-batch", "512",
                  "--batch-policy", policy, "--budget", "1000", "--top", "100000")
    assert out["workload"]["steps"] == 5000 and "epochs" not in out["workload"]
    assert out["workload"]["global_batch"] == 512

    def plan_on(nodes):
        return next(p for p in out["plans"] if p["instance_type"] == "g5.xlarge"
                    and p["region"] == "us-east-1" and p["market"] == "on-demand"
                    and p["nodes"] == nodes)

    # 5000 x 512 samples on 1 node or on 8: the larger cluster is several times faster.
    one, eight = plan_on(1), plan_on(8)
    assert eight["time_p50_s"] < 0.4 * one["time_p50_s"]
    if policy == "fixed-global":
        assert one["global_batch"] == eight["global_batch"] == 512
    else:
        assert eight["global_batch"] == 8 * one["global_batch"] == 8 * 256


@pytest.mark.parametrize("columns", [80, 200])
def test_table_cells_never_wrap(columns):
    """At 80 columns (and piped, where rich assumes 80) lower-priority columns give way, with a
    note, so that every plan stays on one line and the pick's key figures stay."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "COLUMNS": str(columns)}
    out = subprocess.run(
        [str(Path(sys.executable).parent / "advisor"), "recommend", "--model", "resnet50",
         "--deadline", "24h", "--top", "3"], capture_output=True, text=True, env=env,
        check=True).stdout
    lines = out.splitlines()
    plans = [line for line in lines if line.strip()[:2] in ("*1", "2 ", "3 ")]
    assert len(plans) == 3 and all(len(line) <= columns for line in lines)
    header = next(line for line in lines if "instance" in line)
    assert all(key in header for key in ("P(dl)", "market", "GPUs x"))
    pick = json.loads(subprocess.run(
        [str(Path(sys.executable).parent / "advisor"), "recommend", "--model", "resnet50",
         "--deadline", "24h", "--format", "json"], capture_output=True, text=True, env=env,
        check=True).stdout)["pick"]
    assert pick["instance_type"] in plans[0] and pick["market"] in plans[0]
    assert re.search(r" (0\.9\d|1\.00) ", plans[0])  # P(dl) at the 90% confidence
    assert ("time@90%" in header and "narrow console hides" in lines[-1]) == (columns == 80)
