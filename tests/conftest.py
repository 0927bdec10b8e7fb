import os
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
