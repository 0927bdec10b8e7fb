"""The wheel works installed: it carries the data files, and the product finds them inside the
installed package, from any working directory.

The wheel is built from a copy of the checkout and installed with --no-deps into a fresh venv
outside it; the commands run from an empty directory with PYTHONPATH unset. The venv sees
this interpreter's installed dependencies through a .pth file naming their site-packages
folders: a folder named there is only put on sys.path, the .pth files inside it (such as an
editable install of this checkout) are not run, and a test checks that every project package
is imported from the venv.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("advisor", "cloud", "gpuadvisor", "profiler")
IGNORED = shutil.ignore_patterns(".*", "__pycache__", "*.egg-info", "build", "dist", "*.db*")


def _run(args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "src"
    shutil.copytree(ROOT, source, symlinks=True, ignore=IGNORED)
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                  "--no-index", "-q", "-w", str(tmp / "dist"), str(source)])
    assert built.returncode == 0, built.stderr
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    done = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                 "--no-index", "-q", *map(str, (tmp / "dist").glob("*.whl"))])
    assert done.returncode == 0, done.stderr
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
    (Path(purelib.stdout.strip()) / "host_dependencies.pth").write_text(
        "\n".join(site.getsitepackages()) + "\n")
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["GPUADVISOR_HOME"] = str(tmp / "home")  # empty: only the shipped data
    return {"venv": venv, "cwd": elsewhere, "env": env}


def run_installed(installed: dict, *args: str) -> subprocess.CompletedProcess:
    return _run([str(installed["venv"] / "bin" / args[0]), *args[1:]], cwd=installed["cwd"],
                env=installed["env"])


def test_packages_and_data_come_from_the_venv(installed):
    code = ("import json, advisor, cloud, gpuadvisor, profiler\n"
            "from gpuadvisor import data\n"
            "print(json.dumps([m.__file__ for m in (advisor, cloud, gpuadvisor, profiler)]"
            " + [str(data.shipped('model_cards.csv'))]))")
    out = run_installed(installed, "python", "-c", code)
    assert out.returncode == 0, out.stderr
    for path in json.loads(out.stdout):
        assert Path(path).is_relative_to(installed["venv"]), path
    shipped = Path(json.loads(out.stdout)[-1]).parent
    assert {p.name for p in shipped.iterdir()} >= {"model_cards.csv", "gpus.csv",
                                                   "catalog_gcp.csv", "catalog_aws.csv",
                                                   "spot_markets.csv", "model_artifact.json",
                                                   "lifetime_prior.csv", "measurements"}
    assert not shipped.is_symlink()  # the files themselves, not a link back to the checkout


def test_installed_advisor_recommends(installed):
    table = run_installed(installed, "advisor", "recommend", "--model", "resnet50",
                          "--deadline", "24h")
    assert table.returncode == 0, table.stderr
    assert "* the pick" in table.stdout and "prices as of" in table.stdout
    js = run_installed(installed, "advisor", "recommend", "--model", "resnet50", "--deadline",
                       "24h", "--format", "json")
    assert js.returncode == 0, js.stderr
    pick = json.loads(js.stdout)["pick"]
    assert 0 < pick["time_at_confidence_s"] <= 24 * 3600


def test_installed_profiler_card(installed):
    pytest.importorskip("torch")  # the card is computed live with torch
    pytest.importorskip("transformers")
    card = run_installed(installed, "profiler", "card", "resnet50")
    assert card.returncode == 0, card.stderr
    assert "model card: resnet50" in card.stdout and "25,557,032" in card.stdout
