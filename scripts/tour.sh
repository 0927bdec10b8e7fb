#!/usr/bin/env bash
# Re-runs the README tour's commands whose output depends on the fitted model, the catalog or
# the cards, and prints each as the README shows it: "$ command", the output, "(exit N)" when
# it fails. After a change to the model or the data, run it and paste the blocks it prints.
#   bash scripts/tour.sh                  # uses .venv/bin; TOUR_BIN=DIR to use another
#   TOUR_BIN=/other/.venv/bin PYTHONPATH=$PWD bash scripts/tour.sh   # this checkout, another venv
# Tables come out at 140 columns; user data (own cards) goes to a temporary GPUADVISOR_HOME,
# and docs/frontier.png is regenerated.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bin=${TOUR_BIN:-$root/.venv/bin}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export COLUMNS=140 HF_HUB_OFFLINE=1 GPUADVISOR_HOME=$work/home
unset GPUADVISOR_STORE GPUADVISOR_ARTIFACT GPUADVISOR_CATALOG GPUADVISOR_CONFIG

# Prints "$ <command as typed>", runs it from the tour's bin, strips rich's trailing spaces.
show() {
    echo "\$ $*"
    local cmd=$1
    shift
    "$bin/$cmd" "$@" 2>&1 | sed -e 's/ *$//' -e "s|$GPUADVISOR_HOME|~/.local/share/gpu-advisor|"
    local rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || echo "(exit $rc)"
}

section() { printf '\n===== %s =====\n' "$1"; }

section "cheapest under a deadline"
show advisor recommend --model resnet50 --deadline 24h --top 5

section "fastest within a budget, for scripts (plans and assumptions abbreviated as in the README)"
echo '$ advisor recommend --model bert_large --budget 300 --provider aws --epochs 1 --format json'
"$bin/advisor" recommend --model bert_large --budget 300 --provider aws --epochs 1 --format json \
    | "$bin/python" -c 'import json, sys
result = json.load(sys.stdin)
result["plans"] = "[... %d plans]" % len(result["plans"])
result["assumptions"] = "{... %d entries}" % len(result["assumptions"])
print(json.dumps(result, indent=1))'
show advisor recommend --model bert_large --budget 300 --provider aws

section "both constraints, --explain and the Pareto plot"
show advisor recommend --model resnet50 --deadline 2d --budget 150 --gpu V100,A100,T4 --provider gcp \
    --explain --plot docs/frontier.png --top 4

section "SkyPilot and bad input"
show advisor recommend --model resnet50 --deadline 24h --format skypilot
show advisor recommend --model resnt50 --deadline 24h
show advisor recommend --model resnet50 --deadline 24x
show advisor recommend --model resnet50 --deadline 24h --provider azure
show advisor recommend --model resnet50 --deadline 24h --max-nodes abc

section "model cards"
show profiler card resnet50
show profiler card resnt50

section "LLMs, own cards, markets and quotas"
show advisor recommend --model llama_8b --tokens 1B --deadline 3d --precision bf16 --top 5
mkdir -p "$work/my-llama"
cat >"$work/my-llama/config.json" <<'EOF'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1024,
 "intermediate_size": 2816, "num_hidden_layers": 16, "num_attention_heads": 16,
 "num_key_value_heads": 4, "vocab_size": 32000, "max_position_embeddings": 4096}
EOF
(cd "$work" && show profiler card --config my-llama/config.json --seq-len 2048 --save | head -2)
show advisor recommend --model my-llama --tokens 20B --deadline 3d --precision bf16 --top 3
show advisor recommend --model resnet50 --deadline 24h --market on-demand --max-gpus 8 --top 5

section "Python API: recommend"
"$bin/python" - <<'EOF'
from advisor import recommend

result = recommend("resnet50", deadline="24h")
print(repr((result.pick["instance_type"], result.pick["nodes"], result.pick["market"])))
print(result.explain()["filtered"][:2])
print(result.warnings)
EOF

section "Python API: fit and evaluate on a store of the shipped data"
"$bin/advisor" data import published --store "$work/m.db" >/dev/null
for runs in datasets/measurements/*.json; do  # the command imports one file at a time
    "$bin/advisor" data import runs "$runs" --store "$work/m.db" >/dev/null
done
(cd "$work" && "$bin/python" - <<'EOF'
import advisor

fitted = advisor.fit("m.db", output="my_artifact.json")
print(">>>", repr((fitted.path, fitted.training_data["throughput_configs"])))
print(">>>", repr(advisor.evaluate("m.db", split="gpu")))
try:
    advisor.evaluate("m.db", split="nodes", max_train_workers=256)
except advisor.errors.ParameterError as e:
    print(">>> advisor.errors.ParameterError:", e)
EOF
)

cmdare=${CMDARE:-../shared/reference/cmdare}   # CM-DARE's data, where ../shared/reference has it
if [ -d "$cmdare" ]; then
    cmdare=$(realpath "$cmdare")
    section "Modelling: CM-DARE's data, fit and evaluate"
    # Printed as the README types them, from the checkout; the store goes to the temporary dir.
    echo '$ advisor data import cmdare ../shared/reference/cmdare --store cmdare.db'
    (cd "$work" && "$bin/advisor" data import cmdare "$cmdare" --store cmdare.db 2>&1 | sed 's/ *$//')
    echo '$ advisor evaluate --store cmdare.db --split model'
    (cd "$work" && "$bin/advisor" evaluate --store cmdare.db --split model 2>&1 | sed 's/ *$//')
fi
