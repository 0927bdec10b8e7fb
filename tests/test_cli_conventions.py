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

    from cloud.catalog import CATALOG_FILES

    files = [CATALOG_FILES["gcp"], CATALOG_FILES["aws"]]
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
