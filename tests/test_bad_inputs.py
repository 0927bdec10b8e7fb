"""Every command line given bad input (issue 12 item 10): one line on stderr, the documented
exit status (README, "Command-line conventions"), no traceback, and nothing written: a given
store keeps its content, no artifact, plot or store appears. The inputs and the judge are in
tests/bad_inputs.py; benchmarks/bad_inputs.py prints the counts."""

from __future__ import annotations

import subprocess
import sys

import pytest
from bad_inputs import ROOT, Case, cases, make_files, run

CASES = cases()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bad-inputs")
    return folder, make_files(folder)


@pytest.fixture(autouse=True)
def _keep_environment(monkeypatch):
    # main() sets OPENBLAS_NUM_THREADS for `recommend`; keep it out of later tests' processes.
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")


def test_there_are_over_200_distinct_inputs():
    assert len({case.id for case in CASES}) == len(CASES) > 200


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_a_bad_input_gets_one_line_its_exit_status_and_changes_nothing(case, workdir):
    folder, files = workdir
    outcome = run(case, files, folder)
    assert outcome.problems(case) == [], (outcome.err, outcome.traceback)


# At the level of the process, as a user sees it: what Python itself would print is there too.
PROCESS_CASES = [
    Case("advisor", ("recommend", "--model", "resnet50", "--deadline", "24h", "--artifact",
                     "{art_utf16_json}"), 2, "UTF-16"),
    Case("advisor", ("catalog", "show", "--file", "{binary_bin}"), 2, "not UTF-8"),
    Case("advisor", ("recommend", "--model", "resnet50", "--budget", "9" * 400, "--format",
                     "json"), 2, "beyond any number"),
    Case("profiler", ("sweep", "{spec_grid_358400_yaml}", "--dry-run"), 2, "--max-trials"),
    Case("profiler", ("sweep", "{spec_nodes_1000_yaml}", "--dry-run"), 2, "--max-nodes"),
    Case("profiler", ("runs", "--store", "{store}", "--show", "9" * 40), 2, "--show"),
]


@pytest.mark.parametrize("case", PROCESS_CASES, ids=[case.id for case in PROCESS_CASES])
def test_the_process_prints_one_line_and_no_traceback(case, workdir):
    folder, files = workdir
    args = [arg.format(**{k: str(v) for k, v in files.items()}) for arg in case.args]
    done = subprocess.run([sys.executable, "-c", f"from {case.app}.cli import main; main()",
                           *args], capture_output=True, text=True, cwd=folder, timeout=120,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == case.code, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: "), done.stderr
    assert case.says in done.stderr and done.stdout == ""


def test_a_grid_beyond_max_trials_is_refused_before_it_is_expanded(monkeypatch):
    from profiler.spec import SpecError, SweepSpec, check_size

    spec = SweepSpec(name="big", models=["resnet18", "resnet50"], nodes=list(range(1, 101)),
                     batch_per_gpu=list(range(1, 449)), precision=["fp32", "amp", "bf16",
                                                                   "tf32"])
    monkeypatch.setattr(SweepSpec, "trials", lambda self: pytest.fail("grid expanded"))
    with pytest.raises(SpecError, match="358,400 trials, more than max_trials 1,000") as error:
        check_size(spec)
    assert error.value.parameters == ("max_trials",)
    check_size(spec.model_copy(update={"nodes": [1, 2]}), max_trials=400_000, max_nodes=2)


def test_a_sweep_too_big_launches_nothing_and_makes_no_store(tmp_path, monkeypatch):
    from cloud.local import LocalProvider
    from profiler.api import sweep
    from profiler.spec import SpecError

    monkeypatch.setattr(LocalProvider, "launch", lambda *a, **k: pytest.fail("launched"))
    spec = {"name": "big", "provider": "local", "models": ["resnet18"], "nodes": [1000]}
    for limits, parameter in (({}, "max_nodes"), ({"max_trials": 0}, "max_trials")):
        with pytest.raises(SpecError) as error:
            sweep(spec, store=tmp_path / "runs.db", provider=LocalProvider(), **limits)
        assert error.value.parameters == (parameter,)
    assert list(tmp_path.iterdir()) == []


def test_a_command_in_backticks_keeps_its_words():
    from gpuadvisor.cli.output import flag_words
    from gpuadvisor.errors import GpuAdvisorError

    error = GpuAdvisorError("bad catalog; rebuild it with `advisor catalog refresh`", "catalog")
    assert flag_words(error) == "bad --catalog; rebuild it with `advisor catalog refresh`"


def test_max_nodes_above_the_limit_is_searched_when_the_limit_is_raised():
    from advisor.api import recommend
    from advisor.errors import ParameterError

    with pytest.raises(ParameterError, match="max_nodes 65 is more than max_nodes_limit 64"):
        recommend("resnet50", deadline="24h", max_nodes=65, gpus="T4", providers="gcp")
    plans = recommend("resnet50", deadline="24h", max_nodes=65, max_nodes_limit=65,
                      gpus="T4", providers="gcp", regions="us-central1")
    assert plans.pick["nodes"] <= 65


def test_the_recommend_help_states_the_search_limit_in_force():
    import inspect

    from advisor.api import MAX_SEARCH_NODES
    from advisor.cli.recommend import recommend

    option = inspect.signature(recommend).parameters["max_nodes_limit"].default
    assert f"above {MAX_SEARCH_NODES} " in option.help


def test_a_sink_that_cannot_be_written_or_read_is_reported_as_such(tmp_path):
    from bad_inputs import BINARY

    from cloud.provider import SinkError
    from cloud.sinks import check_local_sink, open_sink

    (tmp_path / "in-the-way").write_text("a file where the records' folder would go\n")
    with pytest.raises(SinkError, match="records cannot be written there .*writable directory"):
        check_local_sink(f"file://{tmp_path}/in-the-way/records")
    check_local_sink(f"file://{tmp_path}/records")  # creates the folder, leaves no probe
    assert list((tmp_path / "records").iterdir()) == []
    (tmp_path / "records" / "c1").mkdir()
    (tmp_path / "records" / "c1" / "node-0.jsonl").write_bytes(BINARY)
    with pytest.raises(SinkError, match="records cannot be read: .*node-0.jsonl is not UTF-8"):
        open_sink(f"file://{tmp_path}/records", "c1").read_all()
