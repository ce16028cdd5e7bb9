#!/usr/bin/env bash
# Download the wheels scripts/gpu_check.sh installs on a GPU machine without network, for
# CPython 3.12 on manylinux x86_64, into a git-ignored folder (default .whl/; the device
# tool carries it: docs/gpu.md). Packages published only as an sdist are built into wheels
# here (pure Python). Run it once where the package registry is reachable:
#     bash scripts/gpu_wheels.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-.whl}"
list=scripts/gpu_wheels.txt
py="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
mkdir -p "$dir"
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
           --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
           --platform manylinux1_x86_64)
binary=$(grep -v '^#' "$list" | grep -v ' build$' | awk 'NF {print $1}')
built=$(grep -v '^#' "$list" | grep ' build$' | awk '{print $1}')
# shellcheck disable=SC2086
"$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp "${platforms[@]}" -d "$dir" $binary
for req in $built; do
    "$py" -m pip wheel -q --disable-pip-version-check --no-deps -w "$dir" "$req"
done
echo "gpu_wheels: $(ls "$dir"/*.whl | wc -l) wheels, $(du -sh "$dir" | cut -f1) in $dir"
