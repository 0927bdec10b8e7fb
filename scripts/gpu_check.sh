#!/usr/bin/env bash
# The profiler's GPU checks in one run that fits a short lease of one NVIDIA GPU, writing
# what it measures as it goes, so that a run cut off still yields data:
#   bash scripts/gpu_check.sh OUT_DIR [SECONDS] [MEASUREMENTS.json]
# Stages (STAGES, default all of them, run in this order):
#   costs     what the worker's per-step CUDA-event and stop-decision calls cost the host;
#   timing    CUDA-event step timing against the wall clock;
#   update    what an optimizer step moves a parameter: SGD and AdamW, foreach and fused, on
#             BERT-Large's 335M parameters, against what the physics prices (update.txt);
#   bandwidth what element-wise and normalisation kernels achieve from 64 KiB to 1 GiB, each
#             fitted as a latency plus its bytes at an efficiency, against the physics'
#             kernel floor and memory efficiency (bandwidth.txt);
#   stable    time to a stable figure;
#   sweep     `profiler sweep specs/gpu-local.yaml` on the local provider (NCCL; fp32, tf32,
#             amp, bf16), as a user runs it, for SWEEP_S seconds (default 240);
#   overhead-host, overhead-gpu (or overhead, both)  the worker's instrumentation overhead
#             against a plain DDP loop, interleaved pairs, on a host-bound and a GPU-bound step;
#   zoo       benchmarks/zoo_on_gpu.py until SECONDS (default 540) have passed; ZOO_ARGS are
#             added to its arguments (e.g. "--precisions bf16,tf32,amp,fp32").
# Trials go to OUT_DIR/gpu.db, which MEASUREMENTS.json (an earlier run's export, e.g.
# datasets/measurements/h200.json) seeds: the sweep and the zoo then skip what it holds.
# Printouts go to OUT_DIR/{costs,timing,update,bandwidth,sweep,overhead,zoo}.txt, the GPU,
# driver and versions first; a failed sweep's node logs are appended to sweep.txt. Needs torch
# with CUDA, transformers and this project's dependencies on `python3` ($PYTHON); the checkout
# is put on PYTHONPATH.
set -u
out=$(realpath "${1:?usage: scripts/gpu_check.sh OUT_DIR [SECONDS] [MEASUREMENTS.json]}")
budget=${2:-540}
seed=${3:-}
stages=${STAGES:-costs timing update bandwidth stable sweep overhead zoo}
mkdir -p "$out"
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=false GPUADVISOR_LOCAL_STATE=/tmp/gpu-check-local
py=${PYTHON:-python3}
step() {  # step NAME TIMEOUT_S COMMAND...: run it, log it, never stop the script
    local name=$1 limit=$2; shift 2
    echo "== $name (limit ${limit}s, at ${SECONDS}s)"
    timeout -k 5 "$limit" "$@" >> "$out/$name.txt" 2>&1
    local code=$?
    echo "== $name: exit $code at ${SECONDS}s"
    tail -n 25 "$out/$name.txt"
    return $code
}
wanted() { local s; for s; do [[ " $stages " == *" $s "* ]] && return 0; done; return 1; }
{ nvidia-smi; nvidia-smi -q | grep -iE "driver version|cuda version|product name|power limit" | head -8
  $py -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'nccl', torch.cuda.nccl.version(), 'transformers', transformers.__version__, torch.cuda.get_device_name())"
} > "$out/timing.txt" 2>&1
tail -n 1 "$out/timing.txt"
if [[ -n $seed ]]; then
    $py -c "from advisor.cli import main; main()" data import runs "$seed" \
        --store "$out/gpu.db" --format json > /dev/null || echo "could not seed from $seed"
fi
if wanted costs; then
    step costs 30 $py benchmarks/worker_step_costs.py
fi
if wanted timing; then
    step timing 70 $py benchmarks/cuda_event_timing.py --seconds 6 \
        --workloads resnet50:224:64:bf16,resnet18:64:32:amp
fi
if wanted update; then
    step update 60 $py benchmarks/optimizer_update.py
fi
if wanted bandwidth; then
    step bandwidth 60 $py benchmarks/memory_bandwidth.py
fi
if wanted stable; then
    step timing 60 $py benchmarks/time_to_stable.py --precision bf16 --max-seconds 20 \
        --workloads resnet18:64:32,resnet50:224:128,bert_base:128:32
fi
if wanted sweep; then  # about 30-45 s a trial on a 16-vCPU VM: cold imports, cuDNN autotuning
    step sweep "${SWEEP_S:-240}" $py -c "from profiler.cli import main; main()" sweep specs/gpu-local.yaml \
        --store "$out/gpu.db" --results file:///tmp/gpu-check-records \
        || tail -n 40 /tmp/gpu-check-local/*/logs/*.log >> "$out/sweep.txt" 2>/dev/null
fi
if wanted overhead overhead-host; then
    step overhead 70 $py benchmarks/instrumentation_overhead.py --device cuda --precision amp \
        --model resnet18 --image-size 64 --batch 32 --warmup 50 --steps 300 --pairs 3
fi
if wanted overhead overhead-gpu; then
    step overhead 75 $py benchmarks/instrumentation_overhead.py --device cuda --precision bf16 \
        --model resnet50 --image-size 224 --batch 128 --warmup 20 --steps 60 --pairs 3
fi
if wanted zoo; then
    left=$((budget - SECONDS))
    step zoo $((left > 20 ? left : 20)) $py benchmarks/zoo_on_gpu.py --store "$out/gpu.db" \
        --deadline-s $((left > 40 ? left - 30 : 10)) --min-steps 10 --max-seconds 4 \
        --records "$out/zoo.jsonl" ${ZOO_ARGS:-}
fi
echo "== done at ${SECONDS}s"
