import os
import time
from pathlib import Path

import pytest

from gpuadvisor.cli.config import CONFIG_VARIABLE
from gpuadvisor.cli.settings import SETTINGS, envvar

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The CLIs read settings from environment variables and a config file: none of the
# developer's may reach a test (those that want some set their own).
for _setting in SETTINGS:
    os.environ.pop(envvar(_setting), None)
os.environ[CONFIG_VARIABLE] = os.devnull

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT.parent / "shared" / "reference"


@pytest.fixture(scope="session", autouse=True)
def empty_user_data_dir(tmp_path_factory):
    """Tests read the shipped data, never the refreshed catalogs or own model cards of whoever
    runs them (gpuadvisor/data.py reads the user data dir first), and local clusters keep
    their state apart from the developer's and from other test workers' (pytest-xdist)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPUADVISOR_HOME", str(tmp_path_factory.mktemp("gpuadvisor-home")))
        patch.setenv("GPUADVISOR_LOCAL_STATE", str(tmp_path_factory.mktemp("local-state")))
        yield


@pytest.fixture
def reference() -> Path:
    if not REFERENCE.is_dir():
        pytest.skip("../shared/reference is not beside the checkout")
    return REFERENCE


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny CPU kernels run fastest on one thread on a shared machine; restored afterwards."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def one_thread(monkeypatch):
    """The worker in this process as a group of one, on one torch thread (restored after)."""
    monkeypatch.setenv("PROFILER_AGENT_START", repr(time.time()))
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "TORCHELASTIC_RESTART_COUNT"):
        monkeypatch.delenv(name, raising=False)
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def quick_gcp_retries(monkeypatch):
    """GCP calls retried for half a second, 10 ms apart, instead of for minutes."""
    from cloud.adaptors import gcp

    settings = gcp.Settings(retry_deadline_s=0.5, retry_first_s=0.01, retry_max_s=0.05)
    monkeypatch.setattr(gcp, "SETTINGS", settings)
    return settings
