#!/usr/bin/env bash
# The GPU check (docs/gpu.md): one command on a GPU machine without network, at most 8
# minutes, bringing everything it needs in .whl/ (scripts/gpu_wheels.sh fills it). Each step
# runs under its own time limit and prints `name=value` figure lines; all of them are kept
# in $OUT/gpu_check.txt (./gpu-check/ where OUT is unset), the steps' output in
# $OUT/gpu_check.log.
#     bash scripts/gpu_check.sh             the check
#     bash scripts/gpu_check.sh --dry-run   list the steps; check the wheels against the pins
#     bash scripts/gpu_check.sh --rehearse  every step on this machine's CPU at toy sizes, from
#                                           the project's venv: the same commands, the CPU in
#                                           place of CUDA, the CUDA-only checks named as skipped
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS="${GPU_CHECK_WHEELS:-.whl}"
VENV_PY="$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )"
if [ "${1:-}" = "--dry-run" ]; then
    exec "${PYTHON:-$VENV_PY}" scripts/gpu_check.py dry-run "$WHEELS"
fi
REHEARSE=0
if [ "${1:-}" = "--rehearse" ]; then
    REHEARSE=1
elif [ -n "${1:-}" ]; then
    echo "gpu_check: unknown option '$1'; allowed: --dry-run, --rehearse, or none" >&2
    exit 2
fi
# On the GPU machine the system Python runs the tree with the carried wheels beside it; a
# rehearsal runs the project's venv, which has everything installed.
PY="${PYTHON:-$([ "$REHEARSE" = 1 ] && echo "$VENV_PY" || echo python3)}"
OUT="${OUT:-$PWD/gpu-check}"
mkdir -p "$OUT"
FIGURES="$OUT/gpu_check.txt" LOG="$OUT/gpu_check.log"
: > "$FIGURES"; : > "$LOG"
TMP_ROOT="${GPU_CHECK_ROOT:-/tmp}"
export SITE="$TMP_ROOT/grpo-ablate-site" GPU_CHECK_TMP="$TMP_ROOT/grpo-ablate-gpu-check"
# The GPU machine caches under /tmp; a rehearsal keeps the project's cache (its built policy).
[ "$REHEARSE" = 1 ] || export GRPO_ABLATE_CACHE="$TMP_ROOT/grpo-ablate-cache"
export WANDB_MODE=offline PYTHONUNBUFFERED=1 REHEARSE PY WHEELS
mkdir -p "$GPU_CHECK_TMP"
start=$(date +%s)

step() {  # step NAME SECONDS COMMAND...: figures to $FIGURES, everything to $LOG
    local name=$1 limit=$2; shift 2
    local t0; t0=$(date +%s)
    echo "== step $name (limit ${limit}s)" >> "$LOG"
    # timeout runs programs, not shell functions: a step's function runs in a child bash
    # (exported with export -f), so a name like `install` cannot reach coreutils' install.
    timeout "$limit" bash -c '"$@"' step "$@" 2>>"$LOG" | tee -a "$LOG" | grep -E '^[a-z0-9_]+=' >> "$FIGURES"
    local rc=${PIPESTATUS[0]}
    echo "step_${name}=$([ "$rc" = 0 ] && echo ok || { [ "$rc" = 124 ] && echo timeout || echo "failed ($rc)"; }) in $(( $(date +%s) - t0 ))s" >> "$FIGURES"
    tail -n 1 "$FIGURES"
}

# 1: the carried wheels, then grpo-ablate from the tree
install_wheels() {
    if [ "$REHEARSE" = 1 ]; then
        echo "wheels=skipped (a rehearsal: the wheelhouse is for CPython 3.12 on the GPU machine; --dry-run checks it)"
    else
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$SITE" "$WHEELS"/*.whl || return 1
    fi
    echo "grpo_ablate_version=$(PYTHONPATH="$SITE:$PWD" "$PY" -m grpo_ablate.cli --version)" || return 1
    echo "gpu=$("$PY" -c 'import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else "none (CPU)")')"
}
export -f install_wheels
step install 40 install_wheels
export PYTHONPATH="$SITE:$PWD"

# 2: the tests that need CUDA; on a CPU each is reported skipped by name
gpu_tests() {
    local report rc
    report=$("$PY" -m pytest -m gpu -q -rs -p no:cacheprovider tests/test_training_gpu.py 2>&1)
    rc=$?
    printf '%s\n' "$report" | tail -n 8
    echo "gpu_tests=$(printf '%s\n' "$report" | tail -n 1 | tr -d '=' | xargs)"
    return "$rc"
}
export -f gpu_tests
step gpu_tests 110 gpu_tests

# 3-6: the figures; a rehearsal runs each at toy sizes on the CPU
if [ "$REHEARSE" = 1 ]; then
    step overhead 120 "$PY" scripts/bench_overhead.py --quick
    step scale 240 "$PY" scripts/gpu_check.py scale --rehearse
    step sweep 240 "$PY" scripts/gpu_check.py sweep --rehearse
    step refusals 60 "$PY" scripts/gpu_check.py refusals --rehearse
else
    step overhead 45 "$PY" scripts/bench_overhead.py --repeats 3 --steps 20 \
        --override trainer.use_cpu=false --override trainer.bf16=null
    step scale 180 "$PY" scripts/gpu_check.py scale
    step sweep 80 "$PY" scripts/gpu_check.py sweep
    step refusals 15 "$PY" scripts/gpu_check.py refusals
fi
echo "gpu_check_seconds=$(( $(date +%s) - start ))" | tee -a "$FIGURES"
echo "figures: $FIGURES  log: $LOG"
# The check fails when any step did (its figures and log stay for reading).
! grep -qE '^step_[a-z_]+=(failed|timeout)' "$FIGURES"
