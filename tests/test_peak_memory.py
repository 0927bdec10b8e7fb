"""The worker's GPU memory peaks reach the store and its exports (a CUDA device cannot run
here: the CPU path is real, the CUDA one reads torch.cuda's counters as patched)."""

import json

import pytest

from gpuadvisor.store import Store
from profiler import worker
from profiler.ingest import trial_row
from profiler.runs_export import exchange_trials, flat_rows


def test_on_cpu_the_gpu_peaks_are_empty():
    assert worker.gpu_memory_peaks(False) == {"peak_allocated_bytes": None,
                                              "peak_reserved_bytes": None}


def test_on_cuda_they_are_torch_peaks(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: 3 * 2**30)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda: 4 * 2**30)
    assert worker.gpu_memory_peaks(True) == {"peak_allocated_bytes": 3 * 2**30,
                                             "peak_reserved_bytes": 4 * 2**30}


def test_a_result_with_peaks_is_stored_and_exported(tmp_path):
    result = {"type": "result", "model": "resnet50", "batch_per_gpu": 64, "precision": "amp",
              "world_size": 1, "throughput": 900.0, "peak_allocated_bytes": 9_000_000_000,
              "peak_reserved_bytes": 10_000_000_000}
    row, error = trial_row(result, 1)
    assert error is None
    with Store(tmp_path / "runs.db") as store:
        store.add_trial({"trial_key": "t", "status": "finished", "source": "local", **row})
        [trial] = exchange_trials(store)
    assert (trial["peak_allocated_bytes"], trial["peak_reserved_bytes"]) == (
        9_000_000_000, 10_000_000_000)
    [flat] = flat_rows([trial])
    assert json.loads(json.dumps(flat))["peak_reserved_bytes"] == 10_000_000_000
