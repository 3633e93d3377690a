#!/usr/bin/env bash
# ONNX backend-test conformance on the lent GPU (wgpu on the NVIDIA Vulkan driver), against
# xtask/conformance/wgpu.txt (the lavapipe manifest). Travels: .gl/ (the Vulkan loader and glvnd
# .debs, see gpu_check.sh) and .dev2/ with the release xtask built `--features wgpu`
# (`xtask.xz`) and ../shared/onnx-backend-tests as `obt.tar.xz` (65 MB -> 6.7 MB with xz -9).
# Usage there: bash xtask/device/gpu_conformance.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/obt /work
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib:${LD_LIBRARY_PATH:-}
export CUBECL_AUTOTUNE_LEVEL=minimal RUST_BACKTRACE=0 XDG_RUNTIME_DIR=/tmp
[ -e /work/main ] || ln -s "$PWD" /work/main
xz -dc .dev2/obt.tar.xz | tar -C /tmp/obt -xf -
xz -dc .dev2/xtask.xz > /tmp/xtask && chmod +x /tmp/xtask
export MPPQ_BACKEND_TESTS=/tmp/obt/onnx-backend-tests
nvidia-smi -L
timeout "${LIMIT:-400}" /tmp/xtask conformance --backend wgpu -v --json "$OUT/conformance-h100.json" > "$OUT/conformance-h100.log" 2>&1
echo "rc $?"
grep -E '^1 ' "$OUT/conformance-h100.log" | cut -c1-160 | head -40
tail -8 "$OUT/conformance-h100.log"
