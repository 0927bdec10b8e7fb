import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

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


@pytest.fixture
def quick_gcp_retries(monkeypatch):
    """GCP calls retried for half a second, 10 ms apart, instead of for minutes."""
    from cloud.adaptors import gcp

    settings = gcp.Settings(retry_deadline_s=0.5, retry_first_s=0.01, retry_max_s=0.05)
    monkeypatch.setattr(gcp, "SETTINGS", settings)
    return settings
