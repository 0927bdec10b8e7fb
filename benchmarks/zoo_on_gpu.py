"""The model zoo on this machine's GPU: each model at its zoo batch and half of it, at every
precision the GPU has, trained and measured by the profiler's worker in this process (DDP over
an NCCL group of one), each result stored as a trial in a measurement store as a local sweep
stores it, one trial at a time, so that a run cut off still keeps what it measured.

    python3 benchmarks/zoo_on_gpu.py --store h200.db [--models resnet50,bert_base]
        [--precisions bf16,amp,tf32,fp32] [--batch-fractions 1,0.5] [--deadline-s 300]
        [--max-step-s 1.5]

Configurations run pass by pass (every model at the first batch and the first two
precisions, then at the second batch and the first precision, and so on), so a deadline
leaves whole passes rather than whole models unmeasured. A configuration the store already
holds (same model, batch and precision, finished or failed) is skipped, so a second run goes
on where the first stopped. A step
expected to take longer than --max-step-s (the card's FLOPs a step at a rough rate per
precision, used only to plan) is skipped and said so; llama_8b and llama_70b do not fit one
GPU under DDP with full FP32 state and are left out unless named. A configuration that runs
out of memory is stored as failed with the error, which is a measurement too.

Printed per configuration: throughput with its 95% interval, median and p95 step time, peak
allocated and reserved GPU memory, and seconds from the first step to the verdict.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cloud.gpus import gpu_spec
from gpuadvisor.cards import load_cards
from gpuadvisor.store import Store
from profiler import ingest, worker, zoo

SWEEP = "zoo-on-gpu"
TOO_BIG_FOR_ONE_GPU = ("llama_8b", "llama_70b")
# Rough training rates (TFLOP/s) that only decide which steps are too slow to plan in.
PLANNING_TFLOPS = {"bf16": 250.0, "amp": 250.0, "tf32": 80.0, "fp32": 25.0}
GIB = 1 << 30


def plan(args) -> list[tuple[str, int, str]]:
    models = args.models.split(",") if args.models else [
        m for m in zoo.names() if m not in TOO_BIG_FOR_ONE_GPU]
    fractions = [float(f) for f in args.batch_fractions.split(",")]
    precisions = args.precisions.split(",")
    # Pass order: the first batch at the first two precisions, then the next batch at the
    # first precision, and so on (a precision's rank plus 1.5 per batch).
    passes = sorted(((f, p) for f in fractions for p in precisions),
                    key=lambda fp: precisions.index(fp[1]) + 1.5 * fractions.index(fp[0]))
    return [(model, max(1, round(zoo.resolve(model).batch_per_gpu * fraction)), precision)
            for fraction, precision in passes for model in models]


def stored(store: Store) -> set[tuple[str, int, str]]:
    return {(r["model"], r["batch_per_gpu"], r["precision"])
            for r in store.rows("trials") if r["status"] in ("finished", "failed")}


def trial_row(model: str, batch: int, precision: str, result: dict | None,
              error: str | None) -> dict:
    """The trials row a one-node local sweep would store for this measurement."""
    entry = zoo.resolve(model)
    row, problem = ingest.trial_row(result, 1) if result else ({"extra": {}}, None)
    device = (result or {}).get("device")
    try:
        gpu = gpu_spec(device).gpu if device else None
    except KeyError:
        gpu = device
    status = "failed" if (error or problem) else "finished"
    # In one process the CUDA context, cuDNN and the imports are loaded once for all models:
    # its time to first step is not a start-up figure, so it is kept apart from the column.
    first_step_s = row.pop("time_to_first_step", None)
    return {**row, "trial_key": f"{model}-{batch}-{precision}", "sweep": SWEEP,
            "status": status, "error": error or problem,
            "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "source": "local", "provider": "local", "instance_type": "local-gpu",
            "gpu_type": gpu, "gpus_per_node": 1, "nodes": 1, "sync": "allreduce",
            "spot": 0, "price_per_node_hour": 0.0, "model": model, "batch_per_gpu": batch,
            "precision": precision, "image_size": entry.image_size, "seq_len": entry.seq_len,
            "time_to_first_step": None,
            "extra": {**row.get("extra", {}), "benchmark": "benchmarks/zoo_on_gpu.py",
                      "first_step_in_process_s": first_step_s}}


def measure(model: str, batch: int, precision: str, args,
            sink: str) -> tuple[dict | None, str | None]:
    import torch

    config = worker.WorkerConfig(
        model=model, batch_per_gpu=batch, precision=precision, device=args.device, sink=sink,
        cluster=f"{model}-{batch}-{precision}", tolerance=args.tolerance,
        min_measure_steps=args.min_steps, max_seconds=args.max_seconds)
    try:
        records = worker.run_here(config)
    except torch.OutOfMemoryError as exc:
        return None, f"out of memory: {str(exc).splitlines()[0]}"
    finally:
        gc.collect()
        if args.device == "cuda":
            torch.cuda.empty_cache()
    (first,) = [r for r in records if r["type"] == "first_step"]
    results = [r for r in records if r["type"] == "result"]
    if not results:
        return None, "no result record"
    return {**results[-1], "seconds_to_verdict": results[-1]["t"] - first["t"]}, None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--models", default="", help="comma-separated; default: the zoo")
    parser.add_argument("--precisions", default="bf16,amp,tf32,fp32")
    parser.add_argument("--batch-fractions", default="1,0.5")
    parser.add_argument("--deadline-s", type=float, default=600)
    parser.add_argument("--max-step-s", type=float, default=1.5)
    parser.add_argument("--tolerance", type=float, default=0.02)
    parser.add_argument("--min-steps", type=int, default=20)
    parser.add_argument("--max-seconds", type=float, default=6.0)
    parser.add_argument("--records", type=Path, help="append each result record (JSON lines)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu only to try the script where there is no GPU")
    args = parser.parse_args()
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: torch sees no GPU; this benchmark measures a GPU")
    started = time.monotonic()
    print(f"{'model':<24}{'batch':>7}{'prec':>6}{'samples/s':>12}{'+-%':>6}{'p50 ms':>8}"
          f"{'p95 ms':>8}{'alloc GiB':>10}{'resv GiB':>9}{'s':>6}", flush=True)
    with Store(args.store) as store, tempfile.TemporaryDirectory() as sink:
        done, cards = stored(store), load_cards()
        for model, batch, precision in plan(args):
            if (model, batch, precision) in done:
                continue
            if time.monotonic() - started > args.deadline_s:
                print(f"deadline reached: {model} batch {batch} {precision} and later "
                      "configurations not measured", flush=True)
                break
            flops = float(cards[model]["flops_per_sample"] or 0) if model in cards else 0.0
            step_s = flops * batch / (PLANNING_TFLOPS[precision] * 1e12)
            if step_s > args.max_step_s:
                print(f"{model:<24}{batch:>7}{precision:>6}  skipped: a step would take about "
                      f"{step_s:.1f} s", flush=True)
                continue
            result, error = measure(model, batch, precision, args, sink)
            store.add_trial(trial_row(model, batch, precision, result, error))
            if args.records:
                with args.records.open("a") as f:
                    f.write(json.dumps({"model": model, "batch": batch, "precision": precision,
                                        "error": error, "result": result}) + "\n")
            if error or result["throughput"] is None:
                print(f"{model:<24}{batch:>7}{precision:>6}  {error or 'no step measured'}",
                      flush=True)
                continue
            r = result
            half = ((r["throughput_hi"] - r["throughput_lo"]) / 2 / r["throughput"] * 100
                    if r["throughput_lo"] else float("nan"))
            print(f"{model:<24}{batch:>7}{precision:>6}{r['throughput']:>12.1f}{half:>6.2f}"
                  f"{r['step_time_median'] * 1e3:>8.1f}{r['step_time_p95'] * 1e3:>8.1f}"
                  f"{(r['peak_allocated_bytes'] or 0) / GIB:>10.2f}"
                  f"{(r['peak_reserved_bytes'] or 0) / GIB:>9.2f}"
                  f"{r['seconds_to_verdict']:>6.1f}", flush=True)


if __name__ == "__main__":
    main()
