#!/usr/bin/env bash
# Run the GPU checks on a machine with an NVIDIA GPU (from the repository root):
#   pip install -e '.[gpu,test]'        # or '.[gpu-cu12,test]' for a CUDA 12 driver
#   bash tests/gpu/run_on_device.sh [results-dir]
# 1. the device suite with skips turned into failures; 2. the CPU-side CUDA
# checks (host build, sanitizers, NVRTC); 3. compute-sanitizer memcheck,
# racecheck and synccheck over the device suite when the tool is installed
# (pip install 'nvidia-cuda-sanitizer-api==13.*' or a CUDA toolkit);
# 4. benchmarks/gpu.py.  Logs go to the results directory.
set -u
out=${1:-gpu-results}
mkdir -p "$out"
status=0
nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || true
python -c "import cupy; print(cupy.__version__, cupy.cuda.runtime.runtimeGetVersion(), cupy.cuda.runtime.driverGetVersion())" \
    > "$out/versions.txt" 2>&1
SPGNN_REQUIRE_GPU=1 python -m pytest tests/gpu -q -x -p no:cacheprovider > "$out/pytest_gpu.txt" 2>&1 || status=1
python -m pytest tests/cuda_host -q -p no:cacheprovider > "$out/pytest_cuda_host.txt" 2>&1 || status=1
cs=$(command -v compute-sanitizer || ls "$(python -c 'import sys; print(sys.prefix)')"/lib/python3*/site-packages/nvidia/cu*/bin/compute-sanitizer 2>/dev/null | head -1)
if [ -n "$cs" ]; then
    for tool in memcheck racecheck synccheck; do
        SPGNN_REQUIRE_GPU=1 "$cs" --tool "$tool" --error-exitcode 99 \
            python -m pytest tests/gpu -q -x -p no:cacheprovider -k "elementwise or spmm_sddmm and 300 or test_device_ported" \
            > "$out/sanitizer_$tool.txt" 2>&1 || status=1
    done
else
    echo "compute-sanitizer not found: memcheck/racecheck/synccheck NOT run" | tee "$out/sanitizer_missing.txt"
fi
python -m spgnn bench gpu --out "$out/bench_gpu.json" > "$out/bench_gpu.txt" 2>&1 || status=1
echo "exit $status; logs in $out"
exit $status
