"""One vocabulary: whatever the sweep spec accepts, the worker accepts and runs; the other
parts (workload, physics, CLI) take the same values; every GPU filter and lookup resolves
names alike."""

import pytest

from advisor.candidates import Filters, enumerate_candidates
from advisor.workload import build_workload
from cloud.catalog import load_catalog
from cloud.gpus import gpu_spec, gpu_specs
from cloud.local import LocalProvider
from gpuadvisor.cards import load_cards
from gpuadvisor.gpus import gpu_matches
from gpuadvisor.vocab import MARKETS, PRECISIONS, VocabError, check_precision, market
from profiler import worker
from profiler.orchestrator import agent_config
from profiler.spec import parse_spec

TINY = {"name": "vocab", "models": ["mobilenet_v2"], "batch_per_gpu": 2, "image_size": 16}


@pytest.mark.slow
@pytest.mark.parametrize("precision", PRECISIONS)
def test_every_precision_the_spec_accepts_the_worker_runs(tmp_path, one_thread, precision):
    (trial,) = parse_spec({**TINY, "precision": precision}).trials()
    provider = LocalProvider(state_dir=tmp_path / "state")
    settings = agent_config(trial, provider, f"file://{tmp_path}")["worker"]
    config = worker.WorkerConfig(**settings, sink=str(tmp_path / "sink"), cluster="c",
                                 device="cpu", max_steps=3, min_warmup_steps=0)
    records = worker.run_here(config)
    (result,) = [r for r in records if r["type"] == "result"]
    assert result["precision"] == precision and result["batch_per_gpu"] == 2
    assert result["global_step"] == 3
    import torch

    # PyTorch's defaults (convolutions in TF32, matmuls FP32); tf32 turns matmul TF32 on too
    assert torch.backends.cuda.matmul.allow_tf32 is (precision == "tf32")
    assert torch.backends.cudnn.allow_tf32


@pytest.mark.parametrize("precision", PRECISIONS)
def test_every_precision_is_a_workload_precision(precision):
    assert build_workload(load_cards(), "resnet50", precision=precision).precision == precision


def test_values_outside_the_vocabulary_list_what_is_accepted():
    with pytest.raises(VocabError, match=r"precision 'fp16' is not known; use one of "
                                         r"fp32, tf32, amp, bf16 \(fp16 in a training table "
                                         r"is amp\)"):
        check_precision("fp16")
    with pytest.raises(VocabError, match="precision 'int8' is not known; use one of fp32"):
        check_precision("int8")

def test_a_market_is_named_by_the_spot_flag():
    assert (market(False), market(True)) == MARKETS


@pytest.mark.parametrize("typed, names", [
    ("T4", ("T4",)), ("a100-80gb", ("A100-80GB",)), ("A100", ("A100-40GB", "A100-80GB")),
    ("H100", ("H100-80GB",)), ("L40S", ("L40S",)), ("A10G", ("A10G",)),  # SkyPilot's names
    ("nvidia-tesla-v100", ("V100",)), ("nvidia-l4", ("L4",)),  # GCP's accelerator types
    ("H200", ("H200",)), ("V100-32GB", ("V100-32GB",)), ("V100", ("V100",)),
    ("nvidia-b200", ("B200",)), ("B300", ()),  # not in datasets/gpus.csv
    ("A10", ("A10",)), ("RTX 3090", ("RTX3090",)), ("rtx-a6000", ("RTXA6000",)),  # marketing
    ("RTX 6000 Ada", ("RTX6000Ada",)), ("Titan RTX", ("TitanRTX",)), ("RTX", ()),
    ("P100", ("P100",)), ("P100-SXM2", ("P100SXM2",)),  # the clouds' PCIe part; the DGX-1's
])
def test_one_gpu_resolver_for_what_people_type(typed, names):
    assert gpu_matches(typed, gpu_specs()) == names


@pytest.mark.parametrize("device, names", [
    # torch.cuda.get_device_name() / nvidia-smi, as profiled runs and benchmark tables record it
    ("Tesla V100-SXM2-16GB", ("V100",)), ("Tesla V100-SXM2-32GB", ("V100-32GB",)),
    ("NVIDIA A100-SXM4-40GB", ("A100-40GB",)), ("NVIDIA A100-SXM4-80GB", ("A100-80GB",)),
    ("NVIDIA H100 80GB HBM3", ("H100-80GB",)), ("Tesla K80", ("K80",)), ("Tesla T4", ("T4",)),
    ("Tesla P100-PCIE-16GB", ("P100",)), ("Tesla P100-SXM2-16GB", ("P100SXM2",)),
    ("NVIDIA GeForce RTX 3090", ("RTX3090",)), ("GeForce GTX 1080 Ti", ("GTX1080Ti",)),
    ("NVIDIA RTX 6000 Ada Generation", ("RTX6000Ada",)), ("Quadro RTX 8000", ("QuadroRTX8000",)),
    ("Tesla V100-SXM2", ("V100",)),  # no size: the family's own name
    ("A100-SXM4", ("A100-40GB", "A100-80GB")),  # no size, no own name: both, for a caller to ask
    # PCIe parts of SXM GPUs: rows of their own, named like P100SXM2
    ("Tesla V100-PCIE-16GB", ("V100PCIe",)), ("NVIDIA H100 PCIe", ("H100PCIe",)),
    ("NVIDIA A100 80GB PCIe", ("A100PCIe-80GB",)), ("NVIDIA A100-PCIE-40GB", ("A100PCIe-40GB",)),
    ("Tesla V100-PCIE-32GB", ("V100PCIe-32GB",)),
    # another part than any datasheet row (PCIe against SXM, other memory): nothing
    ("NVIDIA H200 NVL", ()), ("Tesla P100-PCIE-12GB", ()),
    ("NVIDIA", ()),
])
def test_a_drivers_device_name_resolves_to_its_datasheet_row(device, names):
    assert gpu_matches(device, gpu_specs()) == names


def test_a_part_without_its_own_row_is_refused_with_the_row_it_is_not():
    with pytest.raises(KeyError, match=r"'NVIDIA H200 NVL' has no datasheet row: gpus.csv's "
                       r"H200 is the SXM part.*add its own row"):
        gpu_spec("NVIDIA H200 NVL")


@pytest.mark.filterwarnings("ignore:the price catalog")
def test_every_gpu_filter_takes_the_same_names():
    catalog = load_catalog()
    offerings = catalog.as_arrays()
    work = build_workload(load_cards(), "resnet18")
    for typed in ("A100", "h100", "nvidia-tesla-t4"):
        filtered = {o.gpu_type for o in catalog.filter(gpu=typed).offerings}
        cands = enumerate_candidates(offerings, work, Filters(gpus=[typed], max_nodes=1))
        assert filtered == set(cands["gpu_type"]) == set(gpu_matches(typed, gpu_specs()))
    with pytest.raises(KeyError, match="name one of A100-40GB, A100-80GB"):
        gpu_spec("A100")


def test_a_gpu_filter_tells_a_drivers_name_apart_by_form_factor():
    catalog = load_catalog()
    sxm = {o.gpu_type for o in catalog.filter(gpu="NVIDIA H100 80GB HBM3").offerings}
    assert sxm == {"H100-80GB"}
    work = build_workload(load_cards(), "resnet18")
    with pytest.raises(Exception, match="unknown GPU NVIDIA H200 NVL"):  # a PCIe card: not H200
        enumerate_candidates(catalog.as_arrays(), work, Filters(gpus=["NVIDIA H200 NVL"]))
