#!/usr/bin/env bash
# CI lane: the hand-written CPU kernels on aarch64 (the NEON matrix kernel, pooling, the
# elementwise maps), cross-compiled and run under qemu-user. Installs the aarch64 Rust standard
# library, a cross linker and qemu; runs mppq-exec's `cpu::` unit tests, which compare every
# kernel this CPU runs with the portable one and assert that NEON is the kernel chosen.
#
# When the toolchain's aarch64 standard library or the cross tools cannot be installed (no
# network), the lane says so loudly and stops without failing CI: the x86-64 lanes do not depend
# on it. A test that fails does fail CI.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '\n== %s (%ss)\n' "$*" "$SECONDS"; }

target=aarch64-unknown-linux-gnu
if ! rustup target list --installed | grep -qx "$target"; then
    log "installing the $target standard library"
    if ! rustup target add "$target"; then
        echo "AARCH64 LANE NOT RUN: rustup could not install the $target standard library" >&2
        exit 0
    fi
fi
if ! command -v qemu-aarch64 >/dev/null || ! command -v aarch64-linux-gnu-gcc >/dev/null; then
    log "installing qemu-user and the aarch64 cross linker"
    SUDO=""
    [[ "$(id -u)" == 0 ]] || SUDO="sudo"
    if ! { $SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y \
        --no-install-recommends qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross; }; then
        echo "AARCH64 LANE NOT RUN: apt-get could not install qemu-user and the aarch64 cross linker" >&2
        exit 0
    fi
fi
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
log "mppq-exec cpu:: tests on $target (qemu)"
out=$(mktemp)
cargo test --target "$target" -p mppq-exec --lib cpu:: 2>&1 | tee "$out"
grep -qE "test result: ok\. [1-9][0-9]* passed" "$out"
log "aarch64 lane done"
