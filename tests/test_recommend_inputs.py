"""Workload, candidate and duration parsing: what is accepted and what is refused."""

from __future__ import annotations

import numpy as np
import pytest
from test_recommend_fixtures import CARDS, OFFERINGS, offering_arrays

from advisor.candidates import CandidateError, Filters, enumerate_candidates
from advisor.reasons import Reason
from advisor.workload import GIB, WorkloadError, build_workload
from cloud.gpus import gpu_spec
from gpuadvisor.durations import parse_budget, parse_deadline


@pytest.mark.parametrize("text, seconds", [
    ("90m", 5400), ("24h", 86400), ("2d", 172800), ("1d12h", 129600), ("36", 129600),
    ("1.5h", 5400), ("1h30m", 5400), (" 2D ", 172800),
])
def test_deadlines_accepted(text, seconds):
    assert parse_deadline(text) == seconds


@pytest.mark.parametrize("text", ["24x", "-3h", "0", "0h", "h", "", "1h1h", "3 days", "1e3"])
def test_deadlines_refused_say_what_is_accepted(text):
    with pytest.raises(ValueError, match="90m, 24h, 2d, 1d12h"):
        parse_deadline(text)


@pytest.mark.parametrize("text, usd", [("500", 500), ("$1,200", 1200), ("75.5", 75.5),
                                       ("300 USD", 300)])
def test_budgets_accepted(text, usd):
    assert parse_budget(text) == usd


@pytest.mark.parametrize("text", ["0", "-5", "ten", "$", "5 EUR"])
def test_budgets_refused(text):
    with pytest.raises(ValueError, match="positive amount of US dollars"):
        parse_budget(text)


def test_workload_defaults_come_from_the_card_and_overrides_win():
    work = build_workload(CARDS, "TinyNet")
    assert (work.model, work.epochs, work.batch_per_gpu) == ("tinynet", 10, 128)
    assert work.total_samples(np.array([1, 8])).tolist() == [500000, 500000]
    work = build_workload(CARDS, "tinynet", epochs=2, samples=1000, batch_per_gpu=64)
    assert work.total_samples(np.array([4]))[0] == 2000
    steps = build_workload(CARDS, "tinynet", steps=100, batch_per_gpu=32)
    assert steps.total_samples(np.array([1, 8])).tolist() == [3200, 25600]


def test_unknown_model_names_the_closest():
    with pytest.raises(WorkloadError, match="unknown model 'tinynett'; closest: tinynet"):
        build_workload(CARDS, "tinynett")


@pytest.mark.parametrize("kwargs, message", [
    ({"precision": "fp8"}, "precision 'fp8' is not known; use one of fp32, tf32, amp, bf16"),
    ({"epochs": -1}, "^epochs must be positive"),
    ({"batch_per_gpu": 0}, "^batch_per_gpu must be positive"),
    ({"steps": 10, "epochs": 1}, "either steps"),
])
def test_bad_workload_overrides(kwargs, message):
    """Messages name the API's parameters, which the error carries for the CLI to word."""
    with pytest.raises(WorkloadError, match=message) as raised:
        build_workload(CARDS, "tinynet", **kwargs)
    assert set(raised.value.parameters) >= set(kwargs)


def test_memory_estimate_adds_model_state_and_activations():
    work = build_workload(CARDS, "hugenet", precision="amp")
    # 1.5e9 params: 4 B weights + 6e9 B gradients + 8 B AdamW state; 8 x 2e9 B x 0.5 saved
    state = 1.5e9 * 4 + 6e9 + 1.5e9 * 8 + 8 * 2e9 * 0.5
    assert work.memory_per_gpu_bytes() == pytest.approx(1.1 * state + GIB)


def test_candidates_expand_nodes_and_markets():
    work = build_workload(CARDS, "tinynet")
    cands = enumerate_candidates(offering_arrays(), work, Filters(max_nodes=3), gpu_spec)
    with_spot = sum(1 for o in OFFERINGS if not np.isnan(o[7]))
    assert len(cands) == 3 * (len(OFFERINGS) + with_spot)
    assert not cands["spot"][cands["instance_type"] == "a2-highgpu-1g"].any()
    assert set(cands["nodes"]) == {1, 2, 3}
    assert cands.dropped == {}


def test_memory_filter_drops_gpus_too_small_and_says_why():
    work = build_workload(CARDS, "hugenet")  # ~42 GiB per GPU in fp32: no GPU here fits
    cands = enumerate_candidates(offering_arrays(), work, Filters(max_nodes=2), gpu_spec)
    assert len(cands) == 0
    memory = {cut.gpu: cut for cut in cands.dropped if cut.reason is Reason.MEMORY}
    assert memory["T4"].gpu_memory_gb == 16 and memory["A100-40GB"].gpu_memory_gb == 40
    assert memory["T4"].need_gib == round(work.memory_per_gpu_bytes() / GIB, 1) > 40
    small = build_workload(CARDS, "hugenet", precision="amp", batch_per_gpu=1)  # ~27 GiB
    cands = enumerate_candidates(offering_arrays(), small, Filters(max_nodes=2), gpu_spec)
    assert set(cands["gpu_type"]) == {"A100-40GB"}
    assert sum(cands.dropped.values()) == 2 * 2 * 4  # 4 offerings x 2 nodes x 2 markets


@pytest.mark.parametrize("filters, kept", [
    (Filters(providers=["aws"]), {"g4dn.12xlarge", "p3.8xlarge"}),
    (Filters(regions=["europe-west4"]), {"a2-highgpu-1g"}),
    (Filters(gpus=["a100"]), {"a2-highgpu-1g"}),
    (Filters(providers=["GCP"], gpus=["T4", "V100"]),
     {"n1-standard-8-t4", "n1-standard-16-v100x2"}),
])
def test_filters(filters, kept):
    work = build_workload(CARDS, "tinynet")
    cands = enumerate_candidates(offering_arrays(), work, filters, gpu_spec)
    assert set(cands["instance_type"]) == kept
    assert sum(cands.dropped.values()) > 0


@pytest.mark.parametrize("filters, message", [
    (Filters(providers=["azure"]), "unknown provider azure; the catalog has: aws, gcp"),
    (Filters(regions=["mars-1"]), "unknown region mars-1"),
    (Filters(gpus=["H200"]), "unknown GPU H200; the catalog has: A100-40GB, T4, V100"),
    (Filters(max_nodes=0), "^max_nodes must be at least 1"),
])
def test_unknown_filter_values_list_what_the_catalog_holds(filters, message):
    with pytest.raises(CandidateError, match=message):
        enumerate_candidates(offering_arrays(), build_workload(CARDS, "tinynet"), filters,
                             gpu_spec)
