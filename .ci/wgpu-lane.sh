#!/usr/bin/env bash
# CI lane: the executor on Burn's wgpu backend, on a machine without a GPU, through Mesa's
# lavapipe (a software Vulkan driver). Installs lavapipe, builds the xtask with `--features wgpu`
# runs the executor's wgpu tests and the ONNX conformance cases on `--backend wgpu`. Fails if a
# test fails or a case listed in xtask/conformance/wgpu.txt does not pass.
#
#   .ci/wgpu-lane.sh                 # the lane
#   .ci/wgpu-lane.sh --write-manifest  # also rewrite xtask/conformance/wgpu.txt from this run
#
# Environment:
#   WGPU_LANE_FILTERS  space-separated case-name substrings to run (default: all cases; the
#                      cases whose operators the executor lacks are skipped before any GPU work)
#   WGPU_LANE_NO_INSTALL=1  skip the apt-get step (lavapipe already installed)
#   CARGO_TARGET_DIR, CARGO_BUILD_JOBS: as usual
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n== %s (%ss)\n' "$*" "$SECONDS"; }

# 1. Mesa lavapipe + the Vulkan loader.
if [[ "${WGPU_LANE_NO_INSTALL:-0}" != 1 ]] && ! compgen -G '/usr/share/vulkan/icd.d/lvp_icd*.json' >/dev/null; then
    log "installing Mesa lavapipe"
    SUDO=""
    [[ "$(id -u)" == 0 ]] || SUDO="sudo"
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends mesa-vulkan-drivers libvulkan1
fi
ICD="$(compgen -G '/usr/share/vulkan/icd.d/lvp_icd*.json' | head -n1 || true)"
if [[ -z "$ICD" ]]; then
    echo "lavapipe ICD (lvp_icd*.json) not found under /usr/share/vulkan/icd.d" >&2
    exit 2
fi
# Only lavapipe is visible to the Vulkan loader, so the lane runs the same on a machine with a GPU.
export VK_ICD_FILENAMES="$ICD" VK_DRIVER_FILES="$ICD"
# wgpu adapter: the CPU (software) one.
export CUBECL_WGPU_DEFAULT_DEVICE=Cpu
# Kernel compilation and autotuning dominate on a software rasterizer: tune as little as possible.
export CUBECL_AUTOTUNE_LEVEL=minimal
# wgpu's Vulkan setup complains on stderr without it (harmless); backtraces of caught panics are noise.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}" RUST_BACKTRACE="${RUST_BACKTRACE:-0}"
log "Vulkan driver: $ICD"

# 2. Build, in one feature resolution with mppq-exec's wgpu tests: its benchmark dev-dependencies
#    change features of crates under Burn (criterion turns on ciborium's defaults, which
#    cubecl-environment uses; gemm's `default` feature is another), so building the xtask apart from the tests
#    compiled Burn twice (11 minutes on 2 cores). `--all-targets` brings those dev-dependencies in.
log "building xtask and mppq-exec's tests --no-default-features --features wgpu"
# Without xtask's default features: `ndarray` (Burn's ndarray backend is the CPU lane's, and building
# it again against the wgpu feature set would cost minutes) and `full` (only the conformance runner
# and what it needs, mppq-ir, mppq-onnx and mppq-exec, are built with wgpu; not the quantizing crates
# above them).
lane_features=(-p xtask -p mppq-exec --no-default-features --features xtask/wgpu,mppq-exec/wgpu)
cargo build "${lane_features[@]}" --all-targets
XTASK="${CARGO_TARGET_DIR:-target}/debug/xtask"

# 3. The executor's wgpu tests: stand-ins (scalars, bools, 8-bit ints) and device poisoning.
log "mppq-exec's wgpu tests (same features as the build: nothing recompiles)"
cargo test "${lane_features[@]}" --test wgpu --test poison

# 4. Conformance on wgpu (a case that panics in the backend poisons the device; the xtask
#    resumes the remaining cases in a fresh process).
status=0
if [[ -n "${WGPU_LANE_FILTERS:-}" ]]; then
    for f in $WGPU_LANE_FILTERS; do
        log "conformance --backend wgpu --filter $f"
        "$XTASK" conformance --backend wgpu --filter "$f" -v || status=1
    done
else
    log "conformance --backend wgpu"
    "$XTASK" conformance --backend wgpu -v "$@" || status=1
fi
log "done, status $status"
exit "$status"
