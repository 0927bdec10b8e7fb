"""One vocabulary: whatever the sweep spec accepts, the worker accepts and runs; the other
parts (workload, physics, CLI) take the same values."""

import pytest

from advisor.workload import build_workload
from gpuadvisor.vocab import MARKETS, PRECISIONS, VocabError, check_precision, market
from profiler import worker
from profiler.cards import load_cards
from profiler.orchestrator import agent_config
from profiler.spec import parse_spec

TINY = {"name": "vocab", "models": ["mobilenet_v2"], "batch_per_gpu": 2, "image_size": 16}


@pytest.mark.slow
@pytest.mark.parametrize("precision", PRECISIONS)
def test_every_precision_the_spec_accepts_the_worker_runs(tmp_path, one_thread, precision):
    (trial,) = parse_spec({**TINY, "precision": precision}).trials()
    settings = agent_config(trial, "local", f"file://{tmp_path}")["worker"]
    config = worker.WorkerConfig(**settings, sink=str(tmp_path / "sink"), cluster="c",
                                 device="cpu", max_steps=3, min_warmup_steps=0)
    records = worker.run_here(config)
    (result,) = [r for r in records if r["type"] == "result"]
    assert result["precision"] == precision and result["batch_per_gpu"] == 2
    assert result["global_step"] == 3
    import torch

    tf32 = precision == "tf32"  # fp32 means true FP32: TF32 off for matmuls and convolutions
    assert torch.backends.cuda.matmul.allow_tf32 is tf32 and torch.backends.cudnn.allow_tf32 is tf32


@pytest.mark.parametrize("precision", PRECISIONS)
def test_every_precision_is_a_workload_precision(precision):
    assert build_workload(load_cards(), "resnet50", precision=precision).precision == precision


def test_values_outside_the_vocabulary_list_what_is_accepted():
    with pytest.raises(VocabError, match="precision 'fp16' is not known; use one of "
                                         "fp32, tf32, amp, bf16"):
        check_precision("fp16")

def test_a_market_is_named_by_the_spot_flag():
    assert (market(False), market(True)) == MARKETS
