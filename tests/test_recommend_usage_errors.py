"""Usage errors that click itself raises (a value of the wrong type, an unknown option or
command, a missing value) are one line on stderr with exit 2, in both `advisor` and `profiler`,
through the same main() the console scripts run."""

from __future__ import annotations

import pytest

import advisor.cli
import profiler.cli


def run(main, args, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(args)
    out, err = capsys.readouterr()
    return exited.value.code, out, err


@pytest.fixture(autouse=True)
def _keep_environment(monkeypatch):
    # main() sets OPENBLAS_NUM_THREADS for `recommend`; keep it out of later tests' processes.
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")


@pytest.mark.parametrize("main, args, message", [
    (advisor.cli.main, ["recommend", "--model", "resnet50", "--deadline", "1d",
                        "--max-nodes", "abc"],
     "error: invalid value for '--max-nodes': Input should be a valid integer"),
    (advisor.cli.main, ["recommend", "--model", "resnet50", "--deadlin", "3h"],
     "error: no such option: --deadlin (Possible options: --deadline"),
    (advisor.cli.main, ["recommend", "--model"], "error: option '--model' requires an argument"),
    (advisor.cli.main, ["recommend", "--model", "resnet50", "--format", "xml"],
     "error: invalid value for '--format': 'xml' is not one of 'table', 'json', 'csv'"),
    (advisor.cli.main, ["recomend"],
     "error: no such command 'recomend'. Did you mean 'recommend'?"),
    (advisor.cli.main, ["catalog", "show", "--bogus"], "error: no such option: --bogus"),
    (profiler.cli.main, ["card", "resnet50", "--image-size", "3"],
     "error: invalid value for '--image-size': Input should be greater than or equal to 16"),
    (profiler.cli.main, ["sweep"], "error: missing argument 'SPEC.yaml'"),
    (profiler.cli.main, ["runs", "--format", "yaml"], "error: invalid value for '--format'"),
    (profiler.cli.main, ["nope"], "error: no such command 'nope'"),
])
def test_click_usage_errors_are_one_line_exit_2(main, args, message, capsys):
    code, out, err = run(main, args, capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(message), err
    command = next(arg for arg in args if not arg.startswith("-"))
    if command in ("recommend", "card", "sweep", "runs"):  # says where the help is
        assert err.rstrip().endswith(f" {command} --help`)")
    else:
        assert err.rstrip().endswith("--help`)")
    assert out == ""


def test_the_issue_commands_run(capsys):
    code, out, err = run(advisor.cli.main, ["recommend", "--model", "resnet50",
                                            "--deadline", "24h"], capsys)
    assert code == 0 and "resnet50 in fp32: deadline 24.0h" in out and "*1" in out
    # The default precision is named, and what a 16-bit job asks for instead.
    assert "fp32 is PyTorch's default" in out and "--precision amp" in out
    code, out, err = run(advisor.cli.main, ["recommend", "--model", "resnet50", "--deadline",
                                            "24h", "--precision", "amp"], capsys)
    assert code == 0 and "resnet50 in amp:" in out and "PyTorch's default" not in out
    # bert_large's card workload (40 epochs of 6.4M sequences) costs more than $300 anywhere
    # on AWS: exit 1 with one sentence naming the fastest and the cheapest plan.
    code, out, err = run(advisor.cli.main, ["recommend", "--model", "bert_large", "--budget",
                                            "300", "--provider", "aws", "--format", "json"],
                         capsys)
    assert code == 1 and out == ""
    assert err.splitlines()[-1].startswith("error: no plan meets the $300 budget")


def test_errors_from_commands_themselves_keep_their_code(capsys):
    code, _, err = run(advisor.cli.main, ["recommend", "--model", "nomodel", "--deadline",
                                          "1d"], capsys)
    assert code == 2 and err.splitlines()[-1].startswith("error: ")
    code, _, _ = run(advisor.cli.main, ["--help"], capsys)
    assert code == 0
