"""Precision per GPU capability: bf16 only where the GPU has it (cut with a reason among
many GPUs, an error when the user named only GPUs without it), TF32 from Ampere on."""

from __future__ import annotations

import pytest

import advisor.cli
from advisor.candidates import CandidateError, Filters, enumerate_candidates
from advisor.features import FeatureError, configuration_features, model_features
from advisor.reasons import Cut, Reason
from advisor.workload import build_workload
from cloud.catalog import load_catalog
from cloud.gpus import gpu_specs
from gpuadvisor.cards import load_cards

pytestmark = pytest.mark.filterwarnings("ignore::cloud.catalog.StaleCatalogWarning")
BEFORE_AMPERE = {"K80", "P100", "P100SXM2", "V100", "V100-32GB", "V100PCIe", "T4", "GTX1080Ti",
                 "TitanV", "RTX2080Ti", "TitanRTX", "QuadroRTX8000", "QuadroRTX6000",
                 "QuadroRTX5000", "RTX2080", "TitanXp", "GTX1080", "P40", "V100S",
                 "TitanXPascal", "GTXTitanX", "V100PCIe-32GB"}


def test_gpus_csv_says_which_gpus_have_bf16_and_tf32():
    specs = gpu_specs()
    for name, spec in specs.items():
        assert spec.bf16 is spec.tf32 is (name not in BEFORE_AMPERE), name
        assert spec.power_w and spec.pcie_gen in (3, 4, 5), name
    assert specs["T4"].power_w == 70 and specs["L4"].power_w == 72


def candidates(precision, gpus=()):
    workload = build_workload(load_cards(), "resnet50", precision=precision)
    return enumerate_candidates(load_catalog().as_arrays(), workload,
                                Filters(gpus=gpus, max_nodes=2))


def test_bf16_cuts_gpus_without_it_with_a_reason():
    kept = candidates("bf16")
    assert not set(kept["gpu_type"]) & BEFORE_AMPERE
    assert {"A100-80GB", "H100-80GB", "L4"} <= set(kept["gpu_type"])
    assert kept.dropped[Cut(Reason.PRECISION, gpu="T4")] > 0
    assert kept.dropped[Cut(Reason.PRECISION, gpu="V100")] > 0
    # amp runs on every GPU: nothing cut for precision
    assert not any(cut.reason is Reason.PRECISION for cut in candidates("amp").dropped)


def test_bf16_on_gpus_that_lack_it_is_an_error_naming_the_fix():
    with pytest.raises(CandidateError, match="T4 has no bf16.*--precision amp"):
        candidates("bf16", gpus=["T4"])
    # a filter that keeps one GPU with bf16 cuts the other instead
    assert set(candidates("bf16", gpus=["T4", "L4"])["gpu_type"]) == {"L4"}


def test_a_single_configuration_in_bf16_on_a_v100_has_no_features():
    configs = {"model": ["resnet50"], "gpu": ["V100"], "provider": ["aws"],
               "sync": ["allreduce"], "ps_count": [0], "precision": ["bf16"], "nodes": [1],
               "gpus_per_node": [1], "batch_per_gpu": [64], "spot": [False],
               "network_gbps": [10.0]}
    with pytest.raises(FeatureError, match="V100 has no bf16"):
        configuration_features(configs, model_features())


def test_recommend_cli_bf16_on_a_t4_is_one_line_exit_2(capsys, monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    with pytest.raises(SystemExit) as exited:
        advisor.cli.main(["recommend", "--model", "resnet50", "--deadline", "30d",
                          "--precision", "bf16", "--gpu", "T4"])
    _, err = capsys.readouterr()
    assert exited.value.code == 2
    assert err.count("\n") == 1 and "T4 has no bf16" in err and "--precision amp" in err
