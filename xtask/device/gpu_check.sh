#!/usr/bin/env bash
# The GPU check, run on a lent device machine (see docs/wgpu.md, "On a lent GPU"): the machine has
# no Rust, so the release binaries built here with `--features xtask/wgpu` travel `xz -9e`-compressed
# in .dev/ (26 MB: with the tracked tree's 37 MiB in transit that is all the 64 MiB limit allows),
# the Vulkan loader's .deb in .gl/.
# Every step has its own time limit and writes its log under $OUT, so a slow step costs only
# itself. Usage there: bash xtask/device/gpu_check.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/bin /tmp/venv/bin /work
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
# The xtask finds the workspace at its build path, ONNX Runtime through MPPQ_VENV.
[ -e /work/main ] || ln -s "$PWD" /work/main
# (the stamp tells the xtask the venv is current: the image's onnxruntime is 1.30, not the pinned 1.31)
printf '#!/bin/sh\nexec python3 "$@"\n' > /tmp/venv/bin/python; chmod +x /tmp/venv/bin/python
cp xtask/python/requirements.txt /tmp/venv/mppq-requirements.txt
export MPPQ_VENV=/tmp/venv
for b in mppq xtask; do xz -dc ".dev/$b.xz" > "/tmp/bin/$b"; chmod +x "/tmp/bin/$b"; done
# Find a setting under which wgpu sees the GPU: run a testdata model on it.
probe() { /tmp/bin/mppq run testdata/tiny_cnn.onnx --input testdata/tiny_cnn_calib/batch_000.npz --device wgpu -o /tmp/probe > /tmp/probe.log 2>&1; }
ls /usr/local/nvidia/share/vulkan/icd.d/ /usr/share/vulkan/icd.d/ 2>&1 | head; ldconfig -p | grep -E 'libvulkan|GLX_nvidia' | head -4
if ! probe; then
  echo "probe: $(grep -m1 -o 'AdapterUnavailable.*' /tmp/probe.log | cut -c1-120)"
  export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib:${LD_LIBRARY_PATH:-}
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  probe || { unset VK_DRIVER_FILES; probe; } || echo "wgpu sees no GPU: $(tail -c 300 /tmp/probe.log)"
fi
echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset} LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-unset}"
step() { # name limit command...
  local name=$1 limit=$2; shift 2
  echo "=== $name (limit ${limit}s)"
  local t0=$SECONDS
  if [ -x /usr/bin/time ]; then
    timeout "$limit" /usr/bin/time -f "wall %e s, peak RSS %M KB" "$@" > "$OUT/$name.log" 2>&1
  else
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  fi
  local rc=$?
  grep -v -E '^\s*$|█|░' "$OUT/$name.log" | tail -n "${TAIL:-25}"
  echo "=== $name: rc $rc, $((SECONDS - t0)) s"
}
nvidia-smi -L; lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Core|Socket'
grep -o -E 'avx512f|avx512_vnni|avx2' /proc/cpuinfo | sort | uniq -c
python3 -c 'import onnxruntime; print("onnxruntime", onnxruntime.__version__)'
step gen-resnet18 60 python3 xtask/python/gen_testdata.py --resnet18 target/bench/resnet18.onnx --resnet18-calib target/bench/calib
TAIL=30 step bench-wgpu 180 /tmp/bin/xtask bench --device wgpu --runs 10 --warmup 3 --json "$OUT/bench-wgpu.json"
step quantize-r18-wgpu 90 /tmp/bin/mppq quantize target/bench/resnet18.onnx --calib target/bench/calib --device wgpu -o /tmp/q-wgpu
step quantize-r18-cpu 45 /tmp/bin/mppq quantize target/bench/resnet18.onnx --calib target/bench/calib --device cpu -o /tmp/q-cpu
TAIL=30 step bench-cpu 100 /tmp/bin/xtask bench --device cpu --runs 20 --warmup 3 --json "$OUT/bench-cpu.json"
# The same with 8 threads each (the 16 vCPUs may be 8 cores with two hardware threads each).
RAYON_NUM_THREADS=8 TAIL=30 step bench-cpu-8 100 /tmp/bin/xtask bench --device cpu --runs 20 --warmup 3 --threads 8 --json "$OUT/bench-cpu-8.json"
