#!/usr/bin/env bash
# The GPU check (docs/gpu.md): one command on a GPU machine without network, at most 8
# minutes, bringing everything it needs in .whl/ (scripts/gpu_wheels.sh fills it). Each step
# runs under its own time limit and prints `name=value` figure lines; all of them are kept
# in $OUT/gpu_check.txt (./gpu-check/ where OUT is unset), the steps' output in
# $OUT/gpu_check.log.
#     bash scripts/gpu_check.sh             the check
#     bash scripts/gpu_check.sh --dry-run   list the steps; check the wheels against the pins
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS="${GPU_CHECK_WHEELS:-.whl}"
if [ "${1:-}" = "--dry-run" ]; then
    exec "${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}" \
        scripts/gpu_check.py dry-run "$WHEELS"
fi
OUT="${OUT:-$PWD/gpu-check}"
mkdir -p "$OUT"
FIGURES="$OUT/gpu_check.txt" LOG="$OUT/gpu_check.log"
: > "$FIGURES"; : > "$LOG"
export SITE=/tmp/grpo-ablate-site GPU_CHECK_TMP=/tmp/grpo-ablate-gpu-check
export GRPO_ABLATE_CACHE=/tmp/grpo-ablate-cache WANDB_MODE=offline PYTHONUNBUFFERED=1
mkdir -p "$GPU_CHECK_TMP"
start=$(date +%s)

step() {  # step NAME SECONDS COMMAND...: figures to $FIGURES, everything to $LOG
    local name=$1 limit=$2; shift 2
    local t0; t0=$(date +%s)
    echo "== step $name (limit ${limit}s)" >> "$LOG"
    timeout "$limit" "$@" 2>>"$LOG" | tee -a "$LOG" | grep -E '^[a-z0-9_]+=' >> "$FIGURES"
    local rc=${PIPESTATUS[0]}
    echo "step_${name}=$([ "$rc" = 0 ] && echo ok || { [ "$rc" = 124 ] && echo timeout || echo "failed ($rc)"; }) in $(( $(date +%s) - t0 ))s" >> "$FIGURES"
    tail -n 1 "$FIGURES"
}

# 1: the carried wheels, then grpo-ablate from the tree
install() {
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$SITE" "$WHEELS"/*.whl || return 1
    echo "grpo_ablate_version=$(PYTHONPATH="$SITE:$PWD" python3 -m grpo_ablate.cli --version)"
    echo "gpu=$(python3 -c 'import torch; print(torch.cuda.get_device_name())')"
}
step install 40 install
export PYTHONPATH="$SITE:$PWD"
gpu_tests() {
    python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu.py | tail -n 3
    local rc=${PIPESTATUS[0]}
    echo "gpu_tests=$(tail -n 1 "$LOG" | tr -d '=' | xargs)"
    return "$rc"
}
step gpu_tests 110 gpu_tests
step overhead 45 python3 scripts/bench_overhead.py --repeats 3 --steps 20 \
    --override trainer.use_cpu=false --override trainer.bf16=null
step scale 180 python3 scripts/gpu_check.py scale
step sweep 80 python3 scripts/gpu_check.py sweep
step refusals 15 python3 scripts/gpu_check.py refusals
echo "gpu_check_seconds=$(( $(date +%s) - start ))" | tee -a "$FIGURES"
echo "figures: $FIGURES  log: $LOG"
