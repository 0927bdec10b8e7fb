"""Every notebook in notebooks/ runs top to bottom against the shipped data, so none can rot.

Each runs in a temporary working directory, on a kernel pinned to this interpreter (a
`python3` kernelspec placed first on JUPYTER_PATH), and fails on the first cell error."""

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.fixture
def this_python_kernel(tmp_path, monkeypatch):
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (this interpreter)",
        "language": "python",
    }))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    # The accuracy notebook holds the shipped data out at random here: its leave-one-model-out
    # and leave-one-GPU-out (the same `advisor.evaluate` with other splits, which
    # tests/test_evaluate.py runs on CM-DARE's data and on the shipped published figures)
    # took minutes: the notebook ran 173 s held out by GPU and at random, 39 s at random.
    monkeypatch.setenv("ACCURACY_SPLITS", "random")


def test_there_are_notebooks():
    assert any(n.name == "explore_measurements.ipynb" for n in NOTEBOOKS)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(notebook, tmp_path, this_python_kernel):
    import nbformat
    from nbclient import NotebookClient

    workdir = tmp_path / "run"
    workdir.mkdir()
    copy = workdir / notebook.name
    shutil.copy(notebook, copy)
    nb = nbformat.read(copy, as_version=4)
    # A generous per-cell limit: this checks that the notebooks run, not how fast (the
    # accuracy notebook cross-validates the shipped data, minutes on a shared 2-core machine).
    client = NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(workdir)}})
    client.execute()  # raises CellExecutionError naming the cell and its error
    errors = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    images = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert images, "the notebook shows no plot inline"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_reading_cmdare_are_committed_without_outputs(notebook):
    """CM-DARE's data must not land in the repository, not even as a plot or a table."""
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    if any("cmdare" in cell.source.lower() for cell in code):
        assert all(not cell.get("outputs") for cell in code)
