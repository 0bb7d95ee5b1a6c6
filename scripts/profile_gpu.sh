#!/usr/bin/env bash
# Measure a GPU for ddlsim in one go (PyTorch with CUDA; no TensorFlow needed):
#   1. calibration files from real training steps (ddlsim calibrate --framework torch) for
#      resnet50, alexnet, googlenet and inception3 at batches 32/64/128, fp32 and amp;
#   2. the convolution kernel times of traces/measured/kernels' shapes (fp32 / tf32 / fp16),
#      for 'ddlsim kernels'.
# Usage: bash scripts/profile_gpu.sh OUT_DIR [GPU]   (GPU: a catalog id such as h100; default:
# the device PyTorch reports as cuda:0, recorded under its catalog id or a slug of its name)
# Each step is logged to OUT_DIR/*.log; a step that fails does not stop the others.
set -uo pipefail
out=${1:?usage: bash scripts/profile_gpu.sh OUT_DIR [GPU]}
gpu=${2:-}
cd "$(dirname "$0")/.."
mkdir -p "$out/calibration" "$out/kernels"
target=(--device gpu:0)
[ -n "$gpu" ] && target=(--gpu "$gpu")
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv \
  > "$out/gpu.txt" 2>&1
for model in resnet50 alexnet googlenet inception3; do
  python3 -m ddlsim calibrate --framework torch "${target[@]}" --model "$model" \
    --batch 32 --batch 64 --batch 128 --precision fp32 --precision amp \
    --warmup-steps 5 --steps 10 --output "$out/calibration" >> "$out/calibrate.log" 2>&1 \
    || echo "calibrate $model failed (see $out/calibrate.log)"
done
kernel_id=()
[ -n "$gpu" ] && kernel_id=(--gpu-id "$gpu")
python3 scripts/measure_conv_kernels.py --out-dir "$out/kernels" "${kernel_id[@]}" \
  --math fp32 --math tf32 --math fp16 > "$out/kernels.log" 2>&1 \
  || echo "kernel measurement failed (see $out/kernels.log)"
find "$out" -type f | sort
