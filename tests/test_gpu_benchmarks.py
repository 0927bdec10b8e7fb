"""The parts of the GPU benchmarks that need no GPU: the zoo scan's plan and the trial rows it
stores (benchmarks/zoo_on_gpu.py), the cross-GPU comparison on the shipped H200 trials
(benchmarks/measured_vs_predicted.py), and the optimizer-step timing on the CPU
(benchmarks/optimizer_update.py)."""

import json
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest
from script_modules import load_script

ROOT = Path(__file__).resolve().parent.parent


def benchmark(name):
    return load_script(f"benchmarks/{name}.py")


def test_the_zoo_scan_runs_pass_by_pass_and_leaves_out_what_cannot_fit_one_gpu():
    scan = benchmark("zoo_on_gpu")
    plan = scan.plan(Namespace(models="resnet50,bert_base", precisions="bf16,amp,tf32",
                               batch_fractions="1,0.5"))
    passes = [(batch, precision) for model, batch, precision in plan if model == "resnet50"]
    assert passes == [(256, "bf16"), (256, "amp"), (128, "bf16"), (256, "tf32"), (128, "amp"),
                      (128, "tf32")]
    assert [m for m, _, _ in plan[:2]] == ["resnet50", "bert_base"]  # a pass covers every model
    everything = scan.plan(Namespace(models="", precisions="bf16", batch_fractions="1"))
    assert {"llama_8b", "llama_70b"}.isdisjoint(m for m, _, _ in everything)
    assert ("ncf", 131072, "bf16") in everything


def test_a_scan_row_is_a_local_trial_without_a_start_up_figure():
    scan = benchmark("zoo_on_gpu")
    result = {"throughput": 2426.9, "throughput_lo": 2426.7, "throughput_hi": 2427.1,
              "world_size": 1, "device": "NVIDIA H200", "global_step": 70,
              "time_to_first_step": 4.3, "peak_allocated_bytes": 1 << 33, "stable": True}
    row = scan.trial_row("resnet50", 256, "bf16", result, None)
    assert (row["status"], row["gpu_type"], row["source"], row["image_size"]) == \
        ("finished", "H200", "local", 224)
    assert row["time_to_first_step"] is None
    assert row["extra"]["first_step_in_process_s"] == 4.3
    failed = scan.trial_row("bert_base", 32, "amp", None, "out of memory: CUDA out of memory")
    assert (failed["status"], failed["seq_len"], failed["throughput"] if "throughput" in failed
            else None) == ("failed", 128, None)


def test_the_shipped_artifact_answers_the_h200_trials_with_their_measurements():
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "measured_vs_predicted.py"),
         str(ROOT / "datasets" / "measurements" / "h200.json")],
        capture_output=True, text=True, check=True, cwd=ROOT).stdout
    shipped = json.loads((ROOT / "datasets" / "measurements" / "h200.json").read_text())
    finished = [t for t in shipped if t["status"] == "finished"]
    stale = [t for t in finished if t["extra"].get("suspect")]
    rows = [line for line in out.splitlines() if " H200 " in line]
    assert len(finished) >= 56
    assert len(rows) == len(finished) - len(stale)
    assert all(" measured " in line and " 1.00 " in line for line in rows)
    assert "MAPE 0.0%" in out
    # The GNMT trial that ran the written-out LSTM is listed apart, with its reason.
    assert [t["model"] for t in stale] == ["gnmt_v2"]
    assert out.count("left out (suspect): gnmt_v2 bf16 b128") == 1 and "cuDNN" in out


def test_the_step_cost_benchmark_says_in_one_line_that_it_needs_a_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the benchmark runs")
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "worker_step_costs.py")],
                         capture_output=True, text=True, check=False, cwd=ROOT)
    assert out.returncode == 1
    assert out.stderr.strip() == "error: torch sees no GPU; this benchmark measures CUDA calls"


def test_the_optimizer_update_benchmark_times_each_optimizer_beside_its_priced_bytes():
    """A row for SGD and AdamW, each as `foreach` and `fused`, with the bytes a parameter the
    physics prices for it (20 and 28); on the CPU (no datasheet bandwidth) no measured bytes."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "optimizer_update.py"), "--params", "4e4",
         "--tensors", "4", "--steps", "2"],
        capture_output=True, text=True, check=True, cwd=ROOT).stdout.splitlines()
    assert "40,000 fp32 parameters in 4 tensors" in out[0]
    rows = {tuple(line.split()[:2]): line.split() for line in out[2:]}
    assert set(rows) == {(o, i) for o in ("sgd", "adamw") for i in ("foreach", "fused")}
    for (optimizer, _), cells in rows.items():
        if "not" not in cells:
            assert cells[4] == {"sgd": "20", "adamw": "28"}[optimizer]
            assert cells[3] == "-" or cells[3].isdigit()


def test_the_bandwidth_benchmark_times_each_kernel_at_each_size_and_fits_its_line():
    """Each kernel at each size from the largest down by 4x, then each one's fitted latency;
    the header states the shipped fit's floor and memory efficiency."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "memory_bandwidth.py"), "--max-mib", "0.25",
         "--reps", "1", "--dtypes", "float32"],
        capture_output=True, text=True, check=True, cwd=ROOT).stdout.splitlines()
    assert "the shipped fit prices a kernel at" in out[0]
    kernels = ("copy", "add", "softmax", "layer_norm", "batch_norm")
    timed = [line.split() for line in out[2:] if line.split()[0] in kernels
             and not line.startswith(" ")]
    assert [row[0] for row in timed] == list(kernels) * 2  # 64 KiB, then 256 KiB tensors
    moved = {row[0]: row[2] for row in timed[:5]}  # MiB a call, as the operator counter counts
    assert (moved["copy"], moved["add"], moved["batch_norm"]) == ("0.12", "0.19", "0.12")
    fitted = [line.split()[0] for line in out if line.startswith("  ")]
    assert fitted == list(kernels)


def test_a_kernel_s_latency_and_efficiency_come_back_from_its_times():
    """t = t0 + bytes / (efficiency x bandwidth) through exact points gives t0 and the
    efficiency back."""
    script = benchmark("memory_bandwidth")
    sizes = [2**16, 2**20, 2**24, 2**28]
    seconds = [3e-6 + size / (0.8 * 1000e9) for size in sizes]
    t0, efficiency = script.latency_and_efficiency(sizes, seconds, 1000.0)
    assert t0 == pytest.approx(3e-6, rel=1e-6)
    assert efficiency == pytest.approx(0.8, rel=1e-6)
    assert script.latency_and_efficiency(sizes, seconds, None)[1] is None
