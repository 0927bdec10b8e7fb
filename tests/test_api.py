"""The Python API under `advisor recommend`: what it returns, that the CLI prints exactly
its data, and that its errors name its parameters (the CLI words them as flags)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from test_recommend_cli import as_json, recommend

import advisor
from advisor.api import Recommendation
from advisor.errors import NoPlanError, ParameterError


def test_import_advisor_stays_light_and_recommend_is_lazy():
    code = ("import sys, advisor; assert 'advisor.api' not in sys.modules; "
            "from advisor import recommend; assert 'advisor.api' in sys.modules; "
            "print(recommend.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "advisor.api"


def test_recommend_returns_plans_best_first_and_the_cli_prints_its_dict():
    result = advisor.recommend("resnet18", deadline="24h", top=5)
    assert isinstance(result, Recommendation)
    assert result.pick == result.plans[0] and len(result.plans) == 5
    costs = [plan["cost_at_confidence"] for plan in result.plans]
    assert costs == sorted(costs)
    cli = as_json("--model", "resnet18", "--deadline", "24h", "--top", "5", "--explain")
    assert json.loads(json.dumps(result.to_dict(explain=True))) == cli


def test_numbers_and_strings_mean_the_same():
    by_string = advisor.recommend("resnet18", deadline="1d", budget="$300", providers="gcp,aws")
    by_number = advisor.recommend("resnet18", deadline=86400, budget=300.0,
                                  providers=["gcp", "aws"])
    assert by_string.to_dict() == by_number.to_dict()


def test_explain_is_data():
    explained = advisor.recommend("resnet50", deadline="12h", gpus="T4,A100").explain()
    reasons = {cut["reason"] for cut in explained["filtered"]}
    assert "gpu_filter" in reasons and explained["scaling"][0]["nodes"] == 1


@pytest.mark.parametrize("kwargs, parameters, message", [
    ({"deadline": "1d", "max_nodes": 0}, ("max_nodes",), "max_nodes must be at least 1, got 0"),
    ({"budget": 9, "confidence": 1.5}, ("confidence",), "confidence must lie between 0 and 1"),
    ({"deadline": -3}, ("deadline",), "deadline must be a positive number"),
    ({"deadline": "24x"}, ("deadline",), "deadline '24x' is not understood"),
    ({"deadline": "1d", "steps": 5, "epochs": 1}, ("steps", "epochs", "samples"),
     "give either steps or epochs/samples"),
    ({"deadline": "1d", "gpus": "B300"}, ("gpus",), "unknown GPU B300"),
    ({}, ("deadline", "budget"), "give deadline (e.g. 24h) or budget"),
])
def test_errors_name_the_parameter(kwargs, parameters, message):
    with pytest.raises(ParameterError) as raised:
        advisor.recommend("resnet50", **kwargs)
    assert str(raised.value).startswith(message) and raised.value.parameters == parameters
    assert raised.value.exit_code == 2


def test_nothing_meets_is_no_plan_error_exit_1():
    with pytest.raises(NoPlanError, match="no plan meets the 10m deadline") as raised:
        advisor.recommend("gpt2_medium", deadline=600)
    assert raised.value.exit_code == 1


def test_the_cli_words_parameters_as_its_flags():
    result = recommend("resnet50", "--deadline", "1d", "--steps", "5", "--epochs", "1")
    assert result.exit_code == 2
    assert "give either --steps or --epochs/--samples, not both" in result.stderr
    result = recommend("resnet50", "--deadline", "1d", "--batch-policy", "linear")
    assert "--batch-policy must be one of fixed-global, fixed-per-gpu" in result.stderr


def test_skypilot_fragment_is_a_task_with_skypilots_names():
    out = recommend("--model", "resnet50", "--deadline", "24h", "--format", "skypilot")
    assert out.exit_code == 0, out.output
    task = yaml.safe_load(out.stdout)
    pick = advisor.recommend("resnet50", deadline="24h").pick
    assert set(task) == {"resources", "num_nodes"} and task["num_nodes"] == pick["nodes"]
    assert task["resources"] == {
        "cloud": pick["provider"], "region": pick["region"],
        "instance_type": pick["instance_type"],
        "accelerators": f"{pick['gpu']}:{pick['gpus_per_node']}",
        "use_spot": pick["market"] == "spot"}
    a100 = advisor.recommend("resnet50", deadline="24h", gpus="A100-40GB,H100-80GB")
    name = a100.to_skypilot()["resources"]["accelerators"].split(":")[0]
    assert name in ("A100", "H100")  # SkyPilot's names of the 40 GB A100 and the H100


def test_fixed_per_gpu_warns_that_convergence_changes_and_fixed_global_does_not():
    grown = advisor.recommend("resnet18", deadline="2d", batch_policy="fixed-per-gpu",
                              batch_per_gpu=64, top=50)
    assert any("convergence changes" in w for w in grown.warnings)
    assert {p["micro_batch"] * p["accumulation"] for p in grown.plans} == {64}
    kept = advisor.recommend("resnet18", deadline="2d", global_batch=1024, top=50)
    assert not any("convergence" in w for w in kept.warnings)
    assert all(abs(p["global_batch"] - 1024) <= p["nodes"] * p["gpus_per_node"]
               * p["accumulation"] for p in kept.plans)
    result = recommend("resnet18", "--deadline", "2d", "--batch-policy", "fixed-per-gpu")
    assert result.exit_code == 0 and "convergence changes" in result.stderr
