"""benchmarks/model_accuracy.py's choice of parts and splits (`--only`, `--splits`): by
default it runs everything the README quotes; a first look at a physics change runs less."""

import pytest
from script_modules import load_script


@pytest.fixture(scope="module")
def script():
    return load_script("benchmarks/model_accuracy.py")


def test_by_default_every_part_and_every_split_runs(script):
    args = script.arguments([])
    assert args.only == ["cmdare", "published", "sources", "speed"]
    assert args.splits == ["model", "gpu", "nodes", "random", "stack", "gpu-without-20.06"]


def test_only_the_parts_asked_for_run(script, monkeypatch, capsys):
    ran = []
    for part in ("cmdare", "published", "sources"):
        monkeypatch.setattr(script, part, lambda *args, part=part: ran.append((part, *args[1:])))
    script.main(["--only", "published", "speed", "--splits", "model", "gpu"])
    assert ran == [("published", ("model", "gpu"))]
    assert "Artifact.predict, 4 targets x 100,000" in capsys.readouterr().out


def test_a_part_runs_only_the_splits_asked_for(script, monkeypatch, tmp_path):
    reported = []
    monkeypatch.setattr(script, "import_cmdare", lambda store: True)
    monkeypatch.setattr(script, "report",
                        lambda label, store, split, **options: reported.append(split))
    script.cmdare(tmp_path, ("gpu", "stack"))  # stack is the published figures' alone
    assert reported == ["gpu"]


def test_an_unknown_split_is_refused_with_the_known_ones(script, capsys):
    with pytest.raises(SystemExit) as stop:
        script.arguments(["--splits", "models"])
    assert stop.value.code == 2
    assert "choose from 'model', 'gpu', 'nodes', 'random', 'stack'" in capsys.readouterr().err
