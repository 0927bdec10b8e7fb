"""Conventions both apps share (gpuadvisor.cli): --version, shell completion, environment
variables, the config file and -v logging."""

from __future__ import annotations

from importlib.metadata import version

import pytest

import advisor.cli
import profiler.cli

APPS = {"advisor": advisor.cli.main, "profiler": profiler.cli.main}


def run(app: str, *args: str) -> int:
    """Run an app's console entry in this process; its exit status."""
    with pytest.raises(SystemExit) as exited:
        APPS[app](list(args))
    return exited.value.code


@pytest.mark.parametrize("app", APPS)
def test_version_names_the_app_and_the_installed_version(app, capsys):
    assert run(app, "--version") == 0
    assert capsys.readouterr().out == f"{app} {version('gpu-advisor')}\n"


@pytest.mark.parametrize(("app", "words", "expected"), [
    ("advisor", "advisor rec", "recommend"),
    ("advisor", "advisor recommend --dead", "--deadline"),
    ("advisor", "advisor catalog sh", "show"),
    ("profiler", "profiler sw", "sweep"),
])
def test_bash_completion_completes_commands_and_options(app, words, expected, monkeypatch,
                                                        capsys):
    monkeypatch.setenv(f"_{app.upper()}_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", words)
    monkeypatch.setenv("COMP_CWORD", str(len(words.split()) - 1))
    assert run(app) == 0
    assert capsys.readouterr().out.split() == [expected]


def test_show_completion_prints_the_script_to_source(monkeypatch, capsys):
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    assert run("advisor", "--show-completion", "bash") == 0
    script = capsys.readouterr().out
    assert "_ADVISOR_COMPLETE=complete_bash" in script and "complete " in script


def test_settings_come_from_the_environment_and_the_command_line_wins(tmp_path, monkeypatch,
                                                                      capsys):
    monkeypatch.setenv("GPUADVISOR_STORE", str(tmp_path / "from-env.db"))
    assert run("advisor", "evaluate") == 2
    assert f"no measurement store at {tmp_path / 'from-env.db'}" in capsys.readouterr().err
    assert run("profiler", "runs", "--store", str(tmp_path / "given.db")) == 2
    assert f"no measurement store at {tmp_path / 'given.db'}" in capsys.readouterr().err


def test_a_catalog_variable_holds_several_files_separated_like_path(monkeypatch, capsys):
    import os

    from cloud.catalog import catalog_name
    from gpuadvisor.data import shipped

    files = [shipped(catalog_name("gcp")), shipped(catalog_name("aws"))]
    monkeypatch.setenv("GPUADVISOR_CATALOG", str(files[0]))
    assert run("advisor", "catalog", "show", "--gpu", "V100", "--format", "csv") == 0
    assert {line.split(",")[0] for line in capsys.readouterr().out.splitlines()[1:]} == {"gcp"}
    monkeypatch.setenv("GPUADVISOR_CATALOG", os.pathsep.join(map(str, files)))
    assert run("advisor", "catalog", "show", "--gpu", "V100", "--format", "csv") == 0
    assert {line.split(",")[0] for line in capsys.readouterr().out.splitlines()[1:]} == {
        "gcp", "aws"}


@pytest.mark.parametrize(("app", "command", "variables"), [
    ("advisor", ["recommend"], ["GPUADVISOR_ARTIFACT", "GPUADVISOR_CATALOG"]),
    ("advisor", ["fit"], ["GPUADVISOR_STORE"]),
    ("profiler", ["sweep"], ["GPUADVISOR_STORE", "GPUADVISOR_RESULTS"]),
])
def test_help_names_the_environment_variables(app, command, variables, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "200")  # at 80, rich cuts long help lines short
    assert run(app, *command, "--help") == 0
    words = capsys.readouterr().out.replace("│", " ").split()
    assert all(f"{variable}]" in words for variable in variables)


@pytest.fixture
def config(tmp_path, monkeypatch):
    """Write the config file the apps read: config(text) -> its path."""
    path = tmp_path / "config.toml"
    monkeypatch.setenv("GPUADVISOR_CONFIG", str(path))

    def write(text: str):
        path.write_text(text)
        return path

    return write


def test_the_config_file_sets_option_defaults_per_command(config, capsys):
    import json

    config('[advisor.recommend]\nprovider = ["aws"]\ntop = 2\nformat = "json"\n'
           'confidence = 0.95\n[advisor.catalog.show]\ngpu = "V100"\nformat = "csv"\n')
    assert run("advisor", "recommend", "--model", "resnet50", "--deadline", "3d") == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["plans"]) == 2 and {p["provider"] for p in out["plans"]} == {"aws"}
    assert out["constraints"]["confidence"] == 0.95
    assert run("advisor", "catalog", "show") == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].startswith("provider,") and all(",V100," in row or "x V100" in row
                                                   for row in rows[1:])


def test_command_line_beats_environment_beats_config_beats_default(config, tmp_path,
                                                                   monkeypatch, capsys):
    def store_named() -> str:
        assert run("advisor", "evaluate", *given) == 2
        return capsys.readouterr().err.split("no measurement store at ")[1].split(";")[0]

    given: list[str] = []
    config('[defaults]\nstore = "~/shared.db"\n[advisor.fit]\nstore = "fit.db"\n')
    monkeypatch.setenv("HOME", str(tmp_path))
    assert store_named() == str(tmp_path / "shared.db")  # [defaults], with ~ expanded
    assert run("advisor", "fit") == 2  # a command's own table beats [defaults]
    assert "no measurement store at fit.db" in capsys.readouterr().err
    monkeypatch.setenv("GPUADVISOR_STORE", "env.db")
    assert store_named() == "env.db"
    given = ["--store", "line.db"]
    assert store_named() == "line.db"


def test_the_config_file_lives_in_xdg_config_home_by_default(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("GPUADVISOR_CONFIG")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "gpu-advisor").mkdir()
    (tmp_path / "gpu-advisor" / "config.toml").write_text('[profiler.runs]\nstore = "x.db"\n')
    assert run("profiler", "runs") == 2
    assert "no measurement store at x.db" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "message"), [
    ("[advisor.recommend\n", "is not valid TOML (Expected ']'"),
    ("[advsor.recommend]\n", "unknown table [advsor]"),
    ("[advisor.recommend]\nprovdier = 'gcp'\n",
     "[advisor.recommend] has no key 'provdier' (did you mean 'provider'?)"),
    ("[advisor.recommend]\nconfidence = 'high'\n",
     '[advisor.recommend] confidence = "high": input should be a valid number'),
    ("[advisor.recommend]\nexplain = 'yes'\n",
     '[advisor.recommend] explain must be true or false, not "yes"'),
    ("[advisor.recommend]\ntop = true\n", "[advisor.recommend] top must be a number or a string"),
    ("[advisor.recommend]\ntop = [1, 2]\n", "[advisor.recommend] top takes one value, not a list"),
    ("[advisor.recommend]\nformat = 'xml'\n", "'xml' is not one of 'table', 'json', 'csv'"),
    ("[advisor]\nrecommend = 3\n", "advisor.recommend must be a table"),
    ("[defaults]\nstroe = 'x.db'\n", "[defaults] has no key 'stroe' (did you mean 'store'?)"),
])
def test_a_bad_config_file_gets_one_line_naming_the_file_and_the_key(config, text, message,
                                                                    capsys):
    path = config(text)
    assert run("advisor", "recommend", "--model", "resnet50", "--deadline", "3d") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: config file {path}")
    assert message in err


def test_a_table_is_checked_by_the_run_of_its_own_command(config):
    """Only the invoked command is registered (start-up time): a table for another is left to
    that command's run. A fresh process each, as in the other tests every command is."""
    import subprocess
    import sys

    def advisor(*args):
        return subprocess.run([sys.executable, "-c", "from advisor.cli import main; main()",
                               *args], capture_output=True, text=True)

    config("[advisor.fit]\nbogus = 1\n[profiler.sweep]\nmax-cost = 20\n")
    assert advisor("catalog", "show", "--gpu", "V100", "--format", "csv").returncode == 0
    failed = advisor("fit")
    assert failed.returncode == 2 and "[advisor.fit] has no key 'bogus'" in failed.stderr


def test_a_config_variable_naming_no_file_is_an_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPUADVISOR_CONFIG", str(tmp_path / "missing.toml"))
    assert run("profiler", "runs") == 2
    assert "GPUADVISOR_CONFIG names" in capsys.readouterr().err


@pytest.mark.parametrize(("flags", "levels"), [
    ([], set()), (["-v"], {"INFO"}), (["-vv"], {"INFO", "DEBUG"}),
    (["--verbose", "--verbose"], {"INFO", "DEBUG"})])
def test_verbose_logs_where_the_catalog_and_artifact_come_from(flags, levels, config, capsys):
    config('[advisor.recommend]\ntop = 1\n')
    assert run("advisor", *flags, "recommend", "--model", "resnet50", "--deadline", "3d",
               "--format", "json") == 0
    logged = [line.split()[1:3] for line in capsys.readouterr().err.splitlines()
              if line.split()[1:2] in (["INFO"], ["DEBUG"])]
    assert {level for level, _ in logged} == levels
    if levels:
        assert {"cloud.catalog:", "advisor.artifact:", "gpuadvisor.cli.config:"} <= {
            name for _, name in logged}


def test_verbose_logs_each_phase_a_sweep_trial_goes_through(capsys):
    from gpuadvisor.cli.logs import set_verbosity
    from profiler.progress import SweepDisplay

    set_verbosity(1)
    try:
        with SweepDisplay(2, enabled=False) as display:
            display.trial(1, 2, "resnet18 x2")
            for phase in ("launching", "warm-up", "warm-up", "measuring", "revoked"):
                display.phase(phase, 12.5 if phase == "measuring" else None)
    finally:
        set_verbosity(0)
    lines = [line.split(": ", 1)[1] for line in capsys.readouterr().err.splitlines()]
    assert lines == ["trial 1/2 resnet18 x2: launching",
                     "trial 1/2 resnet18 x2: launching -> warm-up",
                     "trial 1/2 resnet18 x2: warm-up -> measuring at 12.5 samples/s",
                     "trial 1/2 resnet18 x2: measuring -> revoked"]


def test_verbose_after_the_command_is_pointed_before_it(capsys):
    assert run("advisor", "recommend", "-v", "--model", "resnet50") == 2
    assert capsys.readouterr().err == (
        "error: no such option: -v (it goes before the command: advisor -v recommend ...)\n")


@pytest.mark.parametrize(("app", "command"), [("advisor", "evaluate"), ("advisor", "recommend"),
                                              ("profiler", "sweep")])
def test_help_paragraphs_flow_to_the_terminal_width(app, command, monkeypatch, capsys):
    """A docstring's line breaks are the source's, not the reader's: at 80 columns a paragraph
    is wrapped at 80, never cut short where the source line ended. Examples keep their lines."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TERMINAL_WIDTH", "80")
    assert run(app, command, "--help") == 0
    description = capsys.readouterr().out.split("╭")[0].splitlines()
    paragraphs, current = [], []
    for line in description + [""]:
        if line.strip():
            current.append(line.rstrip())
        elif current:
            paragraphs.append(current)
            current = []
    prose = [lines for lines in paragraphs if len(lines) >= 3
             and not lines[0].lstrip().startswith((f"{app} ", "Usage:"))]
    assert prose
    for lines in prose:
        assert all(len(line) >= 60 for line in lines[:-1]), lines
