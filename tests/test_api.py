"""The Python APIs (advisor.recommend, advisor.fit, advisor.evaluate, profiler.sweep,
profiler.dry_run): what they return, that the CLIs print exactly their data, and that their
errors name their parameters (the CLIs word them as flags)."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_fit import synthetic_store
from test_recommend_cli import as_json, recommend
from test_sweep import GCP_SPEC, TINY
from typer.testing import CliRunner

import advisor
import profiler
from advisor.api import Recommendation
from advisor.artifact import load_artifact
from advisor.cli.app import app
from advisor.errors import AdvisorError, NoPlanError, ParameterError
from advisor.modelling import Evaluation, FitResult
from gpuadvisor.errors import GpuAdvisorError
from gpuadvisor.store import Store, StoreError
from profiler.api import DryRun, SweepResult
from profiler.cli import sweep as _registers_sweep  # noqa: F401
from profiler.cli.app import app as profiler_app
from profiler.orchestrator import BudgetExceeded
from profiler.spec import SpecError

ROOT = Path(__file__).resolve().parent.parent


def test_import_advisor_stays_light_and_recommend_is_lazy():
    code = ("import sys, advisor; assert 'advisor.api' not in sys.modules; "
            "from advisor import recommend; assert 'advisor.api' in sys.modules; "
            "print(recommend.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "advisor.api"


@pytest.mark.parametrize("package, names, module", [
    ("advisor", "fit, evaluate", "advisor.modelling"),
    ("profiler", "sweep, dry_run", "profiler.api"),
])
def test_the_other_apis_are_lazy_too(package, names, module):
    first = names.split(",")[0]
    code = (f"import sys, {package}; assert {module!r} not in sys.modules; "
            f"from {package} import {names}; print({first}.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == module


def test_recommend_returns_plans_best_first_and_the_cli_prints_its_dict():
    result = advisor.recommend("resnet18", deadline="24h", top=5)
    assert isinstance(result, Recommendation)
    assert result.pick == result.plans[0] and len(result.plans) == 5
    costs = [plan["cost_at_confidence"] for plan in result.plans]
    assert costs == sorted(costs)
    cli = as_json("--model", "resnet18", "--deadline", "24h", "--top", "5", "--explain")
    assert json.loads(json.dumps(result.to_dict(explain=True))) == cli


def test_an_llms_few_sequences_a_second_keep_three_significant_digits():
    from advisor.api import rounded_rate

    assert [rounded_rate(v) for v in (2.6149, 0.123456, 17.349, 2508.84, 0.0)] == \
        [2.61, 0.123, 17.3, 2508.8, 0.0]
    pick = advisor.recommend("llama_8b", tokens="1B", deadline="3d", precision="bf16").pick
    assert all(pick[key] == rounded_rate(pick[key]) for key in ("throughput", "throughput_lo",
                                                               "throughput_hi"))
    from advisor.cli.recommend import _rate  # the table's column

    assert [_rate(v) for v in (8.0, 16.6, 0.5, 99.94, 2508.8)] == \
        ["8.00", "16.6", "0.500", "99.9", "2,509"]


def test_numbers_and_strings_mean_the_same():
    by_string = advisor.recommend("resnet18", deadline="1d", budget="$300", providers="gcp,aws")
    by_number = advisor.recommend("resnet18", deadline=86400, budget=300.0,
                                  providers=["gcp", "aws"])
    assert by_string.to_dict() == by_number.to_dict()


def test_explain_is_data():
    explained = advisor.recommend("resnet50", deadline="12h", gpus="T4,A100").explain()
    reasons = {cut["reason"] for cut in explained["filtered"]}
    assert "gpu_filter" in reasons and explained["scaling"][0]["nodes"] == 1
    # What the pick's step is spent on: shares of one step, which add up to it.
    step = explained["step"]
    assert step["seconds"] > 0 and sum(step["shares"].values()) == pytest.approx(1, abs=0.01)
    assert step["per_step_bound"] == (step["per_step_share"] >= 0.5)
    assert 0 < step["host_seconds"] < step["seconds"] and not step["host_bound"]


def test_explain_says_when_larger_steps_would_help():
    """BERT-base's 1M steps of 256 sequences on 56 GPUs: five sequences a GPU, a step of
    launches and all-reduce; the explanation says so, and the text names the remedy."""
    result = advisor.recommend("bert_base", deadline="14h", providers="gcp", precision="bf16")
    step = result.explain()["step"]
    assert step["per_step_bound"] and step["per_step_share"] > 0.5
    from advisor.cli.recommend import render

    assert any("a larger --global-batch" in line for line in render(result.explain()))


def test_explain_says_when_the_gpu_waits_on_the_host():
    """Tacotron 2's decoder dispatches ~75,000 kernels a step: on H100s the host's dispatch
    outlasts the GPU's work, and the text says a faster GPU gains little."""
    result = advisor.recommend("tacotron2", budget="$5000", gpus="H100-80GB", precision="bf16")
    step = result.explain()["step"]
    assert step["host_bound"] and step["host_seconds"] > step["seconds"]
    from advisor.cli.recommend import render

    assert any("a faster GPU gains little" in line for line in render(result.explain()))


def test_channels_last_jobs_skip_the_transposes_of_16_bit_convolutions():
    """ResNet-50 in AMP on one V100 runs faster kept channels-last; BERT, which has no
    convolutions, and FP32 convolutions do not change; the workload says which it planned."""
    def one_gpu(model, precision, channels_last):
        result = advisor.recommend(model, deadline="300d", precision=precision, gpus="V100",
                                   max_gpus=1, channels_last=channels_last, top=1)
        assert result.to_dict()["workload"]["channels_last"] is channels_last
        return result.plans[0]["throughput"]

    assert one_gpu("resnet50", "amp", True) > 1.1 * one_gpu("resnet50", "amp", False)
    assert one_gpu("resnet50", "fp32", True) == one_gpu("resnet50", "fp32", False)
    assert one_gpu("bert_large", "amp", True) == one_gpu("bert_large", "amp", False)


def test_channels_last_where_it_changes_nothing_says_so():
    """Channels-last spares only 16-bit convolutions their transposes: asked for in fp32, or
    for a model without dense convolutions, the plan is the NCHW one and a warning says why."""
    def warnings(model, precision, channels_last):
        return advisor.recommend(model, deadline="300d", precision=precision, gpus="V100",
                                 max_gpus=1, channels_last=channels_last, top=1).warnings

    assert any("changes nothing priced in fp32" in w for w in warnings("resnet50", "fp32", True))
    assert any("bert_large: its card has no dense convolutions" in w
               for w in warnings("bert_large", "amp", True))
    assert not any("channels-last" in w for w in warnings("resnet50", "amp", True)
                   + warnings("bert_large", "amp", False))
    # a card without the operator split prices its convolutions with the rest of the model
    from advisor.workload import build_workload
    from gpuadvisor.cards import OPERATOR_COLUMNS, load_cards

    cards = load_cards()
    whole = {k: v for k, v in cards["resnet50"].items() if k not in OPERATOR_COLUMNS}
    work = build_workload({**cards, "resnet50": whole}, "resnet50", precision="amp",
                          channels_last=True)
    assert work.warnings() == ["channels-last changes nothing priced for resnet50: its card "
                               "has no operator split, so its convolutions are not priced apart"]


def test_explain_says_what_the_nchw_transposes_take_of_the_step():
    """The pick's step names the share cuDNN's transposes of NCHW tensors take (none kept
    channels-last, none in FP32, none without convolutions), and the text names the remedy."""
    from advisor.cli.recommend import render

    def explained(model, precision, channels_last=False):
        return advisor.recommend(model, deadline="300d", precision=precision, gpus="V100",
                                 max_gpus=1, channels_last=channels_last, top=1).explain()

    nchw = explained("resnet50", "amp")
    step = nchw["step"]
    assert 0.05 < step["transposes_share"] < 0.5
    assert step["transposes_seconds"] == pytest.approx(step["transposes_share"]
                                                       * step["seconds"], rel=0.01)
    assert any("--channels-last) does not spend it" in line for line in render(nchw))
    for quiet in (explained("resnet50", "amp", channels_last=True),
                  explained("resnet50", "fp32"), explained("bert_large", "amp")):
        assert quiet["step"]["transposes_seconds"] == 0
        assert not any("transposing" in line for line in render(quiet))


def test_a_deadline_the_host_cannot_meet_points_at_larger_steps_not_faster_gpus():
    """Tacotron 2 in an hour: even the fastest plan's GPUs wait on their host, so the error
    names fewer, larger steps instead of 16-bit precision."""
    from advisor.errors import NoPlanError

    with pytest.raises(NoPlanError) as raised:
        advisor.recommend("tacotron2", deadline="1h")
    assert "wait on their host" in str(raised.value) and "autocast" not in str(raised.value)
    assert raised.value.parameters == ("global_batch",)


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


# -- advisor.fit and advisor.evaluate -------------------------------------------------------

def advisor_cli(*args: str):
    return CliRunner().invoke(app, list(args))


def test_fit_returns_the_artifact_and_the_cli_prints_its_dict(tmp_path):
    synthetic_store(tmp_path / "m.db", gpus=("T4", "V100"))
    result = advisor.fit(tmp_path / "m.db", output=tmp_path / "a.json")
    assert isinstance(result, FitResult) and result.path == tmp_path / "a.json"
    assert result.training_data["throughput_configs"] == 120 and result.skipped == {}
    assert load_artifact(tmp_path / "a.json").doc == result.artifact
    cli = advisor_cli("fit", "--store", str(tmp_path / "m.db"), "--output",
                      str(tmp_path / "b.json"), "--format", "json")
    assert cli.exit_code == 0, cli.output
    expected = json.loads(json.dumps(result.to_dict()))
    assert json.loads(cli.stdout) == {**expected, "artifact": str(tmp_path / "b.json")}
    unwritten = advisor.fit(tmp_path / "m.db", exclude_software="no-such-release")
    assert unwritten.path is None and unwritten.to_dict()["artifact"] is None
    assert unwritten.coefficients == result.coefficients


def test_evaluate_returns_an_evaluation_and_the_cli_prints_its_dict(tmp_path):
    synthetic_store(tmp_path / "m.db", gpus=("T4", "V100"))
    result = advisor.evaluate(tmp_path / "m.db", split="gpu")
    assert isinstance(result, Evaluation)
    assert (result.split, result.n, len(result.groups)) == ("gpu", 120, 2)
    assert result.mape < 5 < result.baseline_loglinear_mape
    assert result.median_ratio == result.to_dict()["median_ratio"] == pytest.approx(1, abs=0.05)
    assert Evaluation.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    cli = advisor_cli("evaluate", "--store", str(tmp_path / "m.db"), "--split", "gpu",
                      "--format", "json")
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.stdout) == json.loads(json.dumps(result.to_dict()))


@pytest.mark.parametrize("kwargs, parameters, message, flag_message", [
    ({"split": "zone"}, ("split",), "unknown split 'zone'", "unknown --split 'zone'"),
    ({"target": "joules"}, ("target",), "unknown target 'joules'", "unknown --target 'joules'"),
    ({"split": "nodes", "max_train_workers": 16}, ("max_train_workers",),
     "no clusters on both sides of 16 workers", "set --max-train-workers between them"),
    ({"jobs": 0}, ("jobs",), "jobs must be at least 1, got 0", "--jobs"),
])
def test_evaluate_errors_name_the_parameter_and_the_cli_its_flag(tmp_path, kwargs, parameters,
                                                                  message, flag_message):
    synthetic_store(tmp_path / "m.db", gpus=("T4",))
    with pytest.raises(ParameterError, match=message) as raised:
        advisor.evaluate(tmp_path / "m.db", **kwargs)
    assert raised.value.parameters == parameters and "--" not in str(raised.value)
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in kwargs.items()]
    cli = advisor_cli("evaluate", "--store", str(tmp_path / "m.db"), *flags)
    assert cli.exit_code == 2 and flag_message in cli.stderr


def test_fit_errors_are_library_errors(tmp_path):
    with pytest.raises(StoreError, match="no measurement store at"):
        advisor.fit(tmp_path / "none.db")
    synthetic_store(tmp_path / "m.db", gpus=("T4",))
    with pytest.raises(AdvisorError, match="choose another output") as raised:
        advisor.fit(tmp_path / "m.db", output=tmp_path / "no-dir" / "a.json")
    assert raised.value.parameters == ("output",)
    cli = advisor_cli("fit", "--store", str(tmp_path / "m.db"), "--output",
                      str(tmp_path / "no-dir" / "a.json"))
    assert cli.exit_code == 2 and "choose another --output" in cli.stderr


# -- profiler.dry_run and profiler.sweep ----------------------------------------------------

def test_dry_run_takes_a_path_yaml_text_or_a_dict_and_sends_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUADVISOR_LOCAL_STATE", str(tmp_path / "state"))
    (tmp_path / "tiny.yaml").write_text(TINY)
    planned = profiler.dry_run(tmp_path / "tiny.yaml", store=tmp_path / "runs.db")
    assert isinstance(planned, DryRun) and planned.sweep == "tiny"
    assert [len(t["requests"]) for t in planned.trials] == [1, 2]
    assert planned.results == f"file://{tmp_path / 'runs' / 'records'}"
    assert profiler.dry_run(TINY, store=tmp_path / "runs.db") == planned
    assert profiler.dry_run(yaml.safe_load(TINY), store=tmp_path / "runs.db") == planned
    assert not (tmp_path / "state").exists() and not (tmp_path / "runs.db").exists()
    cli = CliRunner().invoke(profiler_app, ["sweep", str(tmp_path / "tiny.yaml"), "--dry-run",
                                            "--format", "json", "--store",
                                            str(tmp_path / "runs.db")])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.stdout) == json.loads(json.dumps(planned.to_dict()))


def test_dry_run_prices_cloud_trials_and_results_override_the_spec():
    planned = profiler.dry_run(GCP_SPEC, results="gs://bucket/runs")
    assert planned.provider == "gcp" and planned.results == "gs://bucket/runs"
    assert planned.estimated_cost_usd > 0


def test_spec_errors_are_library_errors():
    with pytest.raises(SpecError, match="unknown key 'modles'") as raised:
        profiler.dry_run({"name": "x", "provider": "local", "modles": ["resnet18"]})
    assert isinstance(raised.value, GpuAdvisorError) and raised.value.exit_code == 2
    with pytest.raises(SpecError, match="not valid YAML"):
        profiler.dry_run("name: [x\nmodels: y\n")


def test_sweep_stops_before_max_cost_naming_the_parameter(tmp_path):
    with pytest.raises(BudgetExceeded, match="past max_cost \\$0.50; raise max_cost") as raised:
        profiler.sweep(GCP_SPEC, store=tmp_path / "runs.db", max_cost=0.5)
    assert raised.value.parameters == ("max_cost",) and raised.value.exit_code == 3
    with Store(tmp_path / "runs.db") as store:
        assert store.rows("trials") == []


@pytest.mark.slow
def test_sweep_measures_and_resumes(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUADVISOR_LOCAL_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    spec = yaml.safe_load(TINY) | {"nodes": [1]}
    del spec["revocation"]
    result = profiler.sweep(spec, store=tmp_path / "runs.db")
    assert isinstance(result, SweepResult)
    assert (len(result.finished), result.failed, result.skipped) == (1, [], []) and result.ok
    with Store(tmp_path / "runs.db") as store:
        [trial] = store.rows("trials")
    assert trial["trial_key"] == result.finished[0] and trial["throughput"] > 0
    again = profiler.sweep(spec, store=tmp_path / "runs.db")
    assert again.skipped == result.finished and again.finished == []
    assert json.loads(json.dumps(again.to_dict()))["skipped"] == again.skipped


# -- errors name parameters, never flags -----------------------------------------------------

def error_texts(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each string in a `raise` statement of a module, an f-string's values
    as {}."""
    texts = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Raise) and node.exc is not None:
            inside = set()
            for part in ast.walk(node.exc):
                if isinstance(part, ast.JoinedStr):
                    inside.update(map(id, part.values))
                    texts.append((part.lineno, "".join(
                        v.value if isinstance(v, ast.Constant) else "{}" for v in part.values)))
                elif (isinstance(part, ast.Constant) and isinstance(part.value, str)
                      and id(part) not in inside):
                    texts.append((part.lineno, part.value))
    return texts


def test_no_library_module_words_an_error_with_a_flag():
    """Library errors name the API's parameters (`max_cost`); only the CLIs (*/cli/*) word
    them as flags. A flag inside a quoted command (`profiler runs --format json`) is a command
    for the user to run, not a flag of the caller's."""
    flag = re.compile(r"(?<![\w-])--[a-z][\w-]*")
    offenders = []
    for package in ("advisor", "profiler", "cloud", "gpuadvisor"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if "cli" in path.relative_to(ROOT).parts:
                continue
            for line, text in error_texts(path):
                unquoted = re.sub(r"`[^`]*`", "", text)
                if flag.search(unquoted):
                    offenders.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
    assert offenders == []


def test_every_library_error_derives_from_the_neutral_base():
    from advisor.artifact import ArtifactError
    from advisor.features import FeatureError
    from advisor.fitting import FitError
    from advisor.importers import ImportDataError
    from cloud.catalog import CatalogError
    from cloud.provider import ProviderError
    from gpuadvisor.records import RecordError
    from gpuadvisor.vocab import VocabError
    from profiler.zoo import UnknownModelError

    for error in (AdvisorError, SpecError, StoreError, ProviderError, BudgetExceeded,
                  ArtifactError, FeatureError, FitError, ImportDataError, CatalogError,
                  RecordError, VocabError, UnknownModelError):
        assert issubclass(error, GpuAdvisorError)
    assert GpuAdvisorError("x", "max_cost").parameter == "max_cost"
    assert GpuAdvisorError("x").parameter is None


def test_an_error_raised_in_a_worker_process_comes_back_whole():
    """Parallel folds and cards traced on every core send errors back pickled: each comes back
    as raised, whatever its __init__ (StoreWriteError's takes a path and a reason)."""
    import pickle

    from gpuadvisor.cards import CardError
    from gpuadvisor.store import StoreWriteError

    card = pickle.loads(pickle.dumps(CardError("no size 7", "image_size", exit_code=3)))
    assert (type(card), str(card), card.parameters, card.exit_code) == (
        CardError, "no size 7", ("image_size",), 3)
    store = StoreWriteError(Path("m.db"), "disk full")  # an __init__ of its own
    again = pickle.loads(pickle.dumps(store))
    assert (type(again), str(again), again.parameters, again.__dict__) == (
        StoreWriteError, str(store), store.parameters, store.__dict__)


def test_a_card_size_the_model_does_not_take_names_the_parameter():
    from gpuadvisor.cards import CardError
    from profiler.cards import compute_card

    with pytest.raises(CardError, match="gpt2 is a text model: use seq_len") as raised:
        compute_card("gpt2", image_size=64)
    assert raised.value.parameters == ("seq_len", "image_size")


def test_a_card_made_before_the_kernel_counts_warns_that_its_host_goes_unpriced(tmp_path):
    """A split card without `kernels_per_step` (an older profiler's) prices no host side: the
    result says so, and `advisor recommend` prints it; a current card warns nothing."""
    from gpuadvisor.cards import load_cards

    card = {k: v for k, v in load_cards()["resnet50"].items() if v is not None}
    old = {k: v for k, v in card.items() if "kernels_per_step" not in k} | {"model": "my_net"}
    path = tmp_path / "my_net.json"
    path.write_text(json.dumps(old))
    result = advisor.recommend(card=path, deadline="7d", precision="amp")
    warned = [w for w in result.warnings if "my_net has no" in w]
    assert len(warned) == 1
    assert "kernels_per_step or autocast_kernels_per_step" in warned[0]
    assert "`profiler card ... --save`" in warned[0]
    # in fp32 only the host's own count is missing; with both counts, no warning
    fp32 = advisor.recommend(card=path, deadline="7d", precision="fp32")
    assert any("no kernels_per_step (made" in w for w in fp32.warnings)
    path.write_text(json.dumps(card | {"model": "my_net"}))
    current = advisor.recommend(card=path, deadline="7d", precision="amp")
    assert not any("has no" in w for w in current.warnings)
    path.write_text(json.dumps(old))
    printed = recommend("--card", str(path), "--deadline", "7d")
    assert printed.exit_code == 0 and "my_net has no kernels_per_step" in printed.stderr


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
