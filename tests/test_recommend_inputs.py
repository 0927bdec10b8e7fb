"""Workload, candidate and duration parsing: what is accepted and what is refused."""

from __future__ import annotations

import numpy as np
import pytest
from test_recommend_fixtures import CARDS, OFFERINGS, offering_arrays

from advisor.candidates import CandidateError, Filters, enumerate_candidates
from advisor.reasons import Reason
from advisor.workload import WorkloadError, build_workload
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
    assert (work.global_batch, work.batch_policy) == (128 * 8, "fixed-global")  # the recipe
    assert work.total_samples(np.array([1, 8])).tolist() == [500000, 500000]
    work = build_workload(CARDS, "tinynet", epochs=2, samples=1000, batch_per_gpu=64)
    assert work.total_samples(np.array([4]))[0] == 2000
    # Steps count optimizer steps of the global batch: the same data on every cluster.
    steps = build_workload(CARDS, "tinynet", steps=100, global_batch=256)
    assert steps.total_samples(np.array([1, 8])).tolist() == [25600, 25600]
    per_gpu = build_workload(CARDS, "tinynet", steps=100, batch_policy="fixed-per-gpu")
    assert per_gpu.total_samples(np.array([1, 8])).tolist() == [102400, 102400]


def test_the_optimizer_defaults_to_the_recipe_and_an_override_wins():
    """Its state is held on each GPU (AdamW: 8 bytes a parameter beside SGD's 4) and read and
    written by each update, so the same cluster fits less and steps slower."""
    from advisor.memory import NONE, need_mib, state_mib

    assert build_workload(CARDS, "tinynet").optimizer == "sgd"  # an image model's recipe
    sgd, adamw = (build_workload(CARDS, "hugenet", optimizer=name) for name in ("SGD", "adamw"))
    assert (sgd.optimizer, adamw.optimizer) == ("sgd", "adamw")
    states = [float(state_mib(w.memory_model(), NONE, 1)[()]) for w in (sgd, adamw)]
    assert states[1] - states[0] == pytest.approx(4 * 1.5e9 / 2**20, rel=1e-6)
    assert need_mib(adamw.memory_model(), NONE, 1, 1) > need_mib(sgd.memory_model(), NONE, 1, 1)
    with pytest.raises(WorkloadError, match="unknown optimizer 'adagrad'") as raised:
        build_workload(CARDS, "tinynet", optimizer="adagrad")
    assert raised.value.parameters == ("optimizer",)


def test_unknown_model_names_the_closest():
    with pytest.raises(WorkloadError, match="unknown model 'tinynett'; closest: tinynet"):
        build_workload(CARDS, "tinynett")
    # Nothing near: the message says so and how to card a model of one's own.
    with pytest.raises(WorkloadError, match=r"unknown model 'zzz'; no zoo name is close \(all: "
                       r".*\); a model of your own: `profiler card --config CONFIG --save` "
                       r"or `--callable`$"):
        build_workload(CARDS, "zzz")


@pytest.mark.parametrize("kwargs, message", [
    ({"precision": "fp8"}, "precision 'fp8' is not known; use one of fp32, tf32, amp, bf16"),
    ({"epochs": -1}, "^epochs must be positive"),
    ({"batch_per_gpu": 0}, "^batch_per_gpu must be positive"),
    ({"steps": 10, "epochs": 1}, "either steps"),
    ({"global_batch": 0}, "^global_batch must be positive"),
    ({"batch_policy": "linear"}, "^batch_policy must be one of fixed-global, fixed-per-gpu"),
])
def test_bad_workload_overrides(kwargs, message):
    """Messages name the API's parameters, which the error carries for the CLI to word."""
    with pytest.raises(WorkloadError, match=message) as raised:
        build_workload(CARDS, "tinynet", **kwargs)
    assert set(raised.value.parameters) >= set(kwargs)


def test_each_cluster_gets_the_micro_batch_and_accumulation_that_keep_the_global_batch():
    work = build_workload(CARDS, "tinynet", global_batch=1024)
    cands = enumerate_candidates(offering_arrays(), work, Filters(max_nodes=3), gpu_spec)
    workers = cands["nodes"] * cands["gpus_per_node"]
    share = cands["micro_batch"] * cands["accumulation"]
    assert (cands["global_batch"] == share * workers).all()
    assert (np.abs(cands["global_batch"] - 1024) <= workers).all()  # the nearest layout
    assert set(cands["remedy"]) == {"none"}  # tinynet fits at every share
    capped = build_workload(CARDS, "tinynet", global_batch=1024, batch_per_gpu=64)
    cands = enumerate_candidates(offering_arrays(), capped, Filters(max_nodes=1), gpu_spec)
    one = cands["instance_type"] == "n1-standard-8-t4"
    assert set(cands["micro_batch"][one]) == {64} and set(cands["accumulation"][one]) == {16}
    assert set(cands["remedy"][one]) == {"accumulation"}


def test_fixed_per_gpu_keeps_the_per_gpu_batch_and_the_global_batch_grows():
    work = build_workload(CARDS, "tinynet", batch_policy="fixed-per-gpu", batch_per_gpu=32)
    cands = enumerate_candidates(offering_arrays(), work, Filters(max_nodes=2), gpu_spec)
    workers = cands["nodes"] * cands["gpus_per_node"]
    assert (cands["micro_batch"] == 32).all() and (cands["accumulation"] == 1).all()
    assert (cands["global_batch"] == 32 * workers).all()


def test_more_gpus_than_the_global_batch_are_cut_and_counted():
    work = build_workload(CARDS, "tinynet", global_batch=4)
    cands = enumerate_candidates(offering_arrays(), work, Filters(max_nodes=2), gpu_spec)
    assert (cands["nodes"] * cands["gpus_per_node"] <= 4).all()
    assert sum(n for cut, n in cands.dropped.items()
               if cut.reason is Reason.BATCH_BELOW_GPUS) > 0


def test_candidates_expand_nodes_and_markets():
    work = build_workload(CARDS, "tinynet")
    cands = enumerate_candidates(offering_arrays(), work, Filters(max_nodes=3), gpu_spec)
    with_spot = sum(1 for o in OFFERINGS if not np.isnan(o[7]))
    assert len(cands) == 3 * (len(OFFERINGS) + with_spot)
    assert not cands["spot"][cands["instance_type"] == "a2-highgpu-1g"].any()
    assert set(cands["nodes"]) == {1, 2, 3}
    assert cands.dropped == {}


def test_remedies_replace_refusals_and_what_fits_nowhere_says_why():
    work = build_workload(CARDS, "hugenet")  # 1.5e9 params, fp32 AdamW: ~30 GB of states
    cands = enumerate_candidates(offering_arrays(), work, Filters(max_nodes=1), gpu_spec)
    remedy = dict(zip(cands["instance_type"], cands["remedy"]))
    assert "n1-standard-8-t4" not in remedy  # one 16 GB GPU: nothing to shard over
    assert remedy["g4dn.12xlarge"].startswith("fsdp")  # four T4s share the states
    assert remedy["a2-highgpu-1g"] in ("accumulation", "checkpointing")
    assert (cands["need_mib"] <= cands["gpu_memory_mib"]).all()
    memory = {cut.gpu: cut for cut in cands.dropped if cut.reason is Reason.MEMORY}
    assert memory["T4"].gpu_memory_mib == gpu_spec("T4").memory_mib == 15_360
    assert memory["T4"].need_mib > 15_360


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
    (Filters(gpus=["H200"]), "GPU H200 is not rented by GCP or AWS in the price catalog; "
                             "the catalog has: A100-40GB, T4, V100"),  # a datasheet row, no offer
    (Filters(gpus=["Z9"]), "unknown GPU Z9; the catalog has: A100-40GB, T4, V100"),
    (Filters(max_nodes=0), "^max_nodes must be at least 1"),
])
def test_unknown_filter_values_list_what_the_catalog_holds(filters, message):
    with pytest.raises(CandidateError, match=message):
        enumerate_candidates(offering_arrays(), build_workload(CARDS, "tinynet"), filters,
                             gpu_spec)


def test_the_global_batch_defaults_to_the_published_recipe():
    from advisor.workload import recipe_batches
    from gpuadvisor.cards import load_cards

    cards = load_cards()
    assert build_workload(cards, "bert_large").global_batch == 256  # Devlin et al.
    assert build_workload(cards, "gpt2").global_batch == 480  # nanoGPT: 12 x 5 x 8
    assert build_workload(cards, "resnet50").global_batch == 2048
    assert set(recipe_batches()) <= set(cards)
