"""The GPUs of public training benchmarks added to datasets/gpus.csv on 2026-11-27: each
resolves from the device name the driver reports and from its plain name, near names stay
apart, and each row's figures agree with the physics of its chip."""

import math
import re

import pytest

from advisor.features import gpu_features
from cloud.gpus import gpu_spec, gpu_specs
from gpuadvisor.gpus import gpu_matches

# row -> (architecture, market): GeForce/TITAN cards carry the half-rate FP16-with-FP32-accumulate
# tensor figure, workstation and data-centre cards the full rate
ADDED = {
    "QuadroRTX6000": ("Turing", "pro"), "QuadroRTX5000": ("Turing", "pro"),
    "RTXA4000": ("Ampere", "pro"), "RTXA4500": ("Ampere", "pro"), "RTXA5500": ("Ampere", "pro"),
    "RTX3080": ("Ampere", "geforce"), "RTX3080Ti": ("Ampere", "geforce"),
    "RTX3070": ("Ampere", "geforce"), "RTX4080": ("Ada", "geforce"),
    "RTX4070Ti": ("Ada", "geforce"), "RTX2080": ("Turing", "geforce"),
    "TitanXp": ("Pascal", "geforce"), "GTX1080": ("Pascal", "geforce"),
    "P40": ("Pascal", "pro"), "V100S": ("Volta", "pro"), "H100NVL": ("Hopper", "pro"),
    "RTX4000Ada": ("Ada", "pro"), "RTX5000Ada": ("Ada", "pro"),
}
BEFORE_AMPERE = {"Pascal", "Volta", "Turing"}


@pytest.mark.parametrize("device, row", [
    # torch.cuda.get_device_name() / nvidia-smi
    ("Quadro RTX 6000", "QuadroRTX6000"), ("Quadro RTX 5000", "QuadroRTX5000"),
    ("NVIDIA RTX A4000", "RTXA4000"), ("NVIDIA RTX A4500", "RTXA4500"),
    ("NVIDIA RTX A5500", "RTXA5500"), ("NVIDIA GeForce RTX 3080", "RTX3080"),
    ("NVIDIA GeForce RTX 3080 Ti", "RTX3080Ti"), ("NVIDIA GeForce RTX 3070", "RTX3070"),
    ("NVIDIA GeForce RTX 4080", "RTX4080"), ("NVIDIA GeForce RTX 4070 Ti", "RTX4070Ti"),
    ("NVIDIA GeForce RTX 2080", "RTX2080"), ("GeForce RTX 2080", "RTX2080"),
    ("NVIDIA TITAN Xp", "TitanXp"), ("NVIDIA GeForce GTX 1080", "GTX1080"),
    ("GeForce GTX 1080", "GTX1080"), ("Tesla P40", "P40"),
    ("Tesla V100S-PCIE-32GB", "V100S"), ("NVIDIA H100 NVL", "H100NVL"),
    ("NVIDIA RTX 4000 Ada Generation", "RTX4000Ada"),
    ("NVIDIA RTX 5000 Ada Generation", "RTX5000Ada"),
])
def test_a_drivers_device_name_resolves_to_the_added_row(device, row):
    assert gpu_spec(device).gpu == row
    assert gpu_matches(device, gpu_specs()) == (row,)


@pytest.mark.parametrize("typed, row", [
    ("RTX 3080", "RTX3080"), ("rtx-3080-ti", "RTX3080Ti"), ("RTX 3070", "RTX3070"),
    ("RTX 4080", "RTX4080"), ("RTX 4070 Ti", "RTX4070Ti"), ("RTX 2080", "RTX2080"),
    ("RTX A4000", "RTXA4000"), ("rtx-a4500", "RTXA4500"), ("RTX A5500", "RTXA5500"),
    ("A4000", "RTXA4000"), ("a6000", "RTXA6000"),  # as benchmark tables write them
    ("Quadro RTX 6000", "QuadroRTX6000"), ("quadro rtx 5000", "QuadroRTX5000"),
    ("Titan Xp", "TitanXp"), ("GTX 1080", "GTX1080"), ("P40", "P40"), ("V100S", "V100S"),
    ("H100 NVL", "H100NVL"), ("RTX 4000 Ada", "RTX4000Ada"), ("RTX 5000 Ada", "RTX5000Ada"),
    *((name, name) for name in ADDED),  # each canonical name, any case
    *((name.lower(), name) for name in ADDED),
])
def test_what_people_type_resolves_to_the_added_row(typed, row):
    assert gpu_spec(typed).gpu == row


@pytest.mark.parametrize("name, row, not_row", [
    ("RTX 3080", "RTX3080", "RTX3080Ti"),
    ("NVIDIA GeForce RTX 3080 Ti", "RTX3080Ti", "RTX3080"),
    ("Quadro RTX 6000", "QuadroRTX6000", "RTX6000Ada"),
    ("NVIDIA RTX 6000 Ada Generation", "RTX6000Ada", "QuadroRTX6000"),
    ("Quadro RTX 5000", "QuadroRTX5000", "RTX5000Ada"),
    ("NVIDIA RTX 5000 Ada Generation", "RTX5000Ada", "QuadroRTX5000"),
    ("NVIDIA RTX A4000", "RTXA4000", "RTX4000Ada"),
    ("NVIDIA RTX 4000 Ada Generation", "RTX4000Ada", "RTXA4000"),
    ("NVIDIA H100 NVL", "H100NVL", "H100-80GB"),
    ("NVIDIA H100 NVL", "H100NVL", "H100PCIe"),
    ("NVIDIA H100 80GB HBM3", "H100-80GB", "H100NVL"),
    ("NVIDIA H100 PCIe", "H100PCIe", "H100NVL"),
    ("GeForce GTX 1080", "GTX1080", "GTX1080Ti"),
    ("GeForce GTX 1080 Ti", "GTX1080Ti", "GTX1080"),
    ("NVIDIA GeForce RTX 2080", "RTX2080", "RTX2080Ti"),
    ("NVIDIA GeForce RTX 2080 Ti", "RTX2080Ti", "RTX2080"),
    ("Tesla V100S-PCIE-32GB", "V100S", "V100-32GB"),
    ("V100", "V100", "V100S"),
    ("Tesla V100-SXM2-32GB", "V100-32GB", "V100S"),
    ("NVIDIA TITAN Xp", "TitanXp", "TitanRTX"),
])
def test_near_names_do_not_collide(name, row, not_row):
    assert gpu_matches(name, gpu_specs()) == (row,)
    assert not_row != row and not_row in gpu_specs()


@pytest.mark.parametrize("name, matches", [
    ("H100", ("H100-80GB",)),  # the family stays the clouds' SXM part: NVL and PCIe are rows apart
    ("RTX", ()), ("P4", ()),
    # parts without a row of their own stay unmatched rather than borrow a neighbour's figures
    ("NVIDIA GeForce RTX 4080 SUPER", ()), ("NVIDIA GeForce RTX 2080 SUPER", ()),
    ("NVIDIA RTX 4000 SFF Ada Generation", ()), ("NVIDIA H200 NVL", ()),
    ("Tesla V100-PCIE-32GB", ("V100PCIe-32GB",)),  # its own row (2026-12-07), not the V100S
])
def test_parts_without_a_row_match_nothing_new(name, matches):
    assert gpu_matches(name, gpu_specs()) == matches


@pytest.mark.parametrize("name, matches", [
    # benchmark tables' short forms: a GeForce card by its number, a size apart from its unit
    ("3090", ("RTX3090",)), ("4090", ("RTX4090",)), ("3080 Ti", ("RTX3080Ti",)),
    ("2080Ti", ("RTX2080Ti",)), ("1080 Ti", ("GTX1080Ti",)), ("1080", ("GTX1080",)),
    ("RTX8000", ("QuadroRTX8000",)), ("A100 SXM4 80 GB", ("A100-80GB",)),
    ("V100 32 GB", ("V100-32GB",)),
    # "RTX 6000" may be Turing's Quadro or the Ada card: both, so a lookup asks to name one
    ("RTX 6000", ("RTX6000Ada", "QuadroRTX6000")), ("RTX 6000 24GB", ("QuadroRTX6000",)),
    ("RTX 8000 48 GB", ("QuadroRTX8000",)),
    ("3090 Ti", ("RTX3090Ti",)), ("NVIDIA GeForce RTX 3090 Ti", ("RTX3090Ti",)),
    ("2080 Super", ()),  # a part without a row of its own
])
def test_short_names_of_benchmark_tables(name, matches):
    assert gpu_matches(name, gpu_specs()) == matches


def test_every_added_row_is_present_once_with_its_capabilities():
    specs = gpu_specs()
    for name, (arch, _) in ADDED.items():
        spec = specs[name]
        assert spec.architecture == arch, name
        assert spec.form_factor == "PCIe", name
        assert spec.bf16 is spec.tf32 is (arch not in BEFORE_AMPERE), name
        assert spec.pcie_gen in (3, 4, 5) and spec.power_w, name
        assert spec.nvlink_gb_s is None, name  # none has an NVLink switch: bridges pair 2 cards
        assert spec.source and spec.memory_gb > 0 and spec.mem_bw_gbps > 0, name


def _row_notes():
    import csv

    from gpuadvisor import data

    with open(data.find("gpus.csv"), newline="") as handle:
        return {row["gpu"]: row for row in csv.DictReader(handle)}


def test_added_rows_are_dated_and_say_what_they_rest_on():
    rows = _row_notes()
    for name in ADDED:
        assert rows[name]["as_of"] == "2026-11-27", name
        assert rows[name]["notes"], name


@pytest.mark.parametrize("name", sorted(ADDED))
def test_fp32_peak_is_two_flops_per_cuda_core_at_the_boost_clock(name):
    spec, notes = gpu_spec(name), _row_notes()[name]["notes"]
    cores = int(re.search(r"(\d+) CUDA cores", notes).group(1))
    if spec.boost_clock_mhz is None:  # V100S: no clock read; the notes give the implied boost
        implied = spec.fp32_tflops * 1e6 / (2 * cores)
        assert name == "V100S" and f"{implied:.0f} MHz boost" in notes
        return
    assert spec.fp32_tflops == pytest.approx(2 * cores * spec.boost_clock_mhz / 1e6, rel=0.03)
    assert spec.base_clock_mhz < spec.boost_clock_mhz


@pytest.mark.parametrize("name", sorted(ADDED))
def test_tensor_figure_follows_the_rows_convention(name):
    """Dense FP16 with FP32 accumulate: GeForce Ampere/Ada at 2x FP32 (half rate), GeForce Turing
    at 4x; workstation/data-centre Ampere and Ada at 4x, Quadro Turing at 8x (full rate); Pascal
    has no tensor cores (empty, never 0)."""
    spec = gpu_spec(name)
    arch, market = ADDED[name]
    if arch == "Pascal":
        assert spec.tensor_tflops is None
        return
    assert spec.tensor_tflops >= spec.fp32_tflops
    if arch in ("Volta", "Hopper"):  # datasheet figures: 130 / 16.4, 835.5 / 60
        assert spec.tensor_tflops / spec.fp32_tflops > 7
        return
    ratio = {("Ampere", "geforce"): 2, ("Ada", "geforce"): 2, ("Turing", "geforce"): 4,
             ("Ampere", "pro"): 4, ("Ada", "pro"): 4, ("Turing", "pro"): 8}[arch, market]
    assert spec.tensor_tflops == pytest.approx(ratio * spec.fp32_tflops, rel=0.02)


@pytest.mark.parametrize("name", sorted(ADDED))
def test_memory_bandwidth_and_size_are_plausible_for_the_memory(name):
    spec = gpu_spec(name)
    assert 8 <= spec.memory_gb <= 94
    assert 300 <= spec.mem_bw_gbps <= 4000
    assert spec.memory_mib >= spec.memory_gb * 1e9 / 2**20 * 0.9  # usable ~ the decimal GB


def test_h100_nvl_is_one_gpu_of_the_pair_with_its_own_figures():
    nvl, sxm, pcie = gpu_spec("NVIDIA H100 NVL"), gpu_spec("H100"), gpu_spec("NVIDIA H100 PCIe")
    assert nvl.memory_gb == 94 and nvl.memory_mib == 95_830  # nvidia-smi total
    assert pcie.fp32_tflops < nvl.fp32_tflops < sxm.fp32_tflops
    assert pcie.tensor_tflops < nvl.tensor_tflops < sxm.tensor_tflops
    assert nvl.mem_bw_gbps > sxm.mem_bw_gbps  # HBM3 on six stacks


@pytest.mark.parametrize("name", sorted(ADDED))
def test_every_added_row_gives_the_model_its_features(name):
    features = gpu_features(name)
    for key in ("gpu_fp32_tflops", "gpu_tensor_tflops", "gpu_mem_bw_gbps", "gpu_memory_gb",
                "gpu_clock_fraction", "gpu_fp32_issue_fraction"):
        assert math.isfinite(features[key]), (key, features)
    assert 0 < features["gpu_clock_fraction"] <= 1
    ampere_on = float(ADDED[name][0] not in BEFORE_AMPERE)
    assert features["gpu_tf32"] == features["gpu_bf16"] == ampere_on


@pytest.mark.parametrize("name, matches", [
    # The two TITAN X cards of jcjohnson/cnn-benchmarks (2026-12-07), by the driver's names
    ("TITAN X (Pascal)", ("TitanXPascal",)), ("NVIDIA TITAN X (Pascal)", ("TitanXPascal",)),
    ("GeForce GTX TITAN X", ("GTXTitanX",)), ("GTX Titan X", ("GTXTitanX",)),
    ("titanxpascal", ("TitanXPascal",)), ("gtxtitanx", ("GTXTitanX",)),
    ("NVIDIA TITAN Xp", ("TitanXp",)),  # the 2017 card stays apart
    ("Titan X", ()),  # either of two cards: a name must say which
])
def test_the_two_titan_x_cards_are_told_apart(name, matches):
    assert gpu_matches(name, gpu_specs()) == matches


def test_the_titan_x_rows_agree_with_their_chips():
    """FP32 peak = 2 FLOPs x CUDA cores x boost clock: 3584 cores on the Pascal card, 3072 on
    the Maxwell one; neither has tensor cores, bf16 or TF32."""
    pascal, maxwell = gpu_spec("TitanXPascal"), gpu_spec("GTXTitanX")
    assert math.isclose(pascal.fp32_tflops, 2 * 3584 * 1531e6 / 1e12, rel_tol=2e-3)
    assert math.isclose(maxwell.fp32_tflops, 2 * 3072 * 1075e6 / 1e12, rel_tol=2e-3)
    assert (pascal.architecture, maxwell.architecture) == ("Pascal", "Maxwell")
    for spec in (pascal, maxwell):
        assert not spec.tensor_tflops and not spec.bf16 and not spec.tf32
