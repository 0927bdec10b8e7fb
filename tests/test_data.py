"""gpuadvisor/data.py: the one way to the data files, shipped and the user's own."""

from pathlib import Path

import pytest

import gpuadvisor
from gpuadvisor import data

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("advisor", "cloud", "gpuadvisor", "profiler")


@pytest.fixture
def no_user_env(monkeypatch, tmp_path):
    for name in ("GPUADVISOR_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_user_dir_gpuadvisor_home_then_xdg_then_default(no_user_env, monkeypatch):
    assert data.user_dir() == no_user_env / ".local" / "share" / "gpu-advisor"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")  # the XDG spec ignores it
    assert data.user_dir() == no_user_env / ".local" / "share" / "gpu-advisor"
    monkeypatch.setenv("XDG_DATA_HOME", "/xdg/data")
    assert data.user_dir() == Path("/xdg/data/gpu-advisor")
    monkeypatch.setenv("GPUADVISOR_HOME", "~/gpua")
    assert data.user_dir() == no_user_env / "gpua"


def test_shipped_files_are_inside_the_package_and_are_the_repositorys():
    shipped = data.shipped("gpus.csv")
    assert shipped.parent == Path(gpuadvisor.__file__).parent / "datasets"
    assert shipped.resolve() == ROOT / "datasets" / "gpus.csv"  # the link, in a checkout
    assert sorted(p.name for p in data.shipped("measurements").glob("*.json"))


def test_the_users_copy_is_read_first(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUADVISOR_HOME", str(tmp_path))
    assert data.find("gpus.csv") == data.shipped("gpus.csv")
    (tmp_path / "gpus.csv").write_text("gpu\n")
    assert data.find("gpus.csv") == tmp_path / "gpus.csv"


def test_product_code_finds_data_only_through_the_accessor():
    """No module computes a path to datasets/ itself: installed, that path does not exist."""
    offenders = [str(path.relative_to(ROOT)) for package in PRODUCT
                 for path in (ROOT / package).rglob("*.py")
                 if '"datasets"' in path.read_text() and path != ROOT / "gpuadvisor" / "data.py"]
    assert offenders == []
