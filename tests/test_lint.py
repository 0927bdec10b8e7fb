"""`ruff check` passes on the whole checkout with the project's configuration (pyproject.toml:
line length 100; pycodestyle, pyflakes, import order; notebooks included). CI runs only
pytest, so this is where lint runs in CI; ruff comes with the `test` extra."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def ruff_command() -> list[str]:
    """The ruff of this interpreter's environment: its executable beside sys.executable (not
    resolved: a virtual environment's python is a link), else `python -m ruff`; never some
    other ruff on PATH, whose version the project did not choose."""
    bin_dir = Path(sys.executable).parent
    for name in ("ruff", "ruff.exe"):
        if (bin_dir / name).is_file():
            return [str(bin_dir / name)]
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    pytest.skip("ruff is not installed in this environment (pip install -e '.[test]')")


def test_ruff_check_passes():
    result = subprocess.run(
        [*ruff_command(), "check", "--no-cache", "--output-format", "concise", "."],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, (
        f"ruff check found problems (exit {result.returncode}):\n{result.stdout}{result.stderr}")
