#!/usr/bin/env bash
# The first run on a GPU machine, in one script: set up, run the GPU-marked tests (vLLM on CUDA,
# the engine, trainer and losses on CUDA), the NCCL weight-push bench, then `bureau train` on one
# GPU (vLLM engine and FSDP trainer sharing it) with a small random Qwen3, and print the figures
# a user compares: decode and trainer tokens/s, weight-sync time and share of a step, memory
# peaks, staleness. Needs only the repository and pip access to PyPI. Meant to finish within 10
# minutes; exits non-zero on any failure. Nothing in CI depends on it.
#
#   scripts/gpu_check.sh                    # everything, output under runs/gpu-check/
#   BUREAU_VLLM_PYTHON=/path/bin/python scripts/gpu_check.sh   # a venv that already has vllm
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${GPU_CHECK_OUT:-runs/gpu-check}
mkdir -p "$OUT"
started=$(date +%s)
say() { echo "[gpu-check $(( $(date +%s) - started ))s] $*"; }

command -v nvidia-smi >/dev/null || { echo "no nvidia-smi: this is not a GPU machine" >&2; exit 1; }
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader

# 1. The main venv: `make venv` pins torch==2.13.0, which PyPI ships as its CUDA build.
say "setting up .venv"
make --no-print-directory venv >"$OUT/setup.log" 2>&1 || { tail -30 "$OUT/setup.log"; exit 1; }
.venv/bin/python -c "import torch; assert torch.cuda.is_available(), 'torch sees no GPU'; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"

# 2. vLLM, the regular CUDA package, in a venv of its own (it pins its own torch).
if [[ -z "${BUREAU_VLLM_PYTHON:-}" ]]; then
  say "installing vllm into .venv-vllm-gpu"
  python3 -m venv .venv-vllm-gpu
  .venv-vllm-gpu/bin/pip install -q vllm >>"$OUT/setup.log" 2>&1 || { tail -30 "$OUT/setup.log"; exit 1; }
  export BUREAU_VLLM_PYTHON=$PWD/.venv-vllm-gpu/bin/python
fi
"$BUREAU_VLLM_PYTHON" -c "import vllm; print('vllm', vllm.__version__)"

# 3. The GPU-marked tests and the vLLM tests (now on CUDA); a missing vLLM is a failure.
say "GPU and vLLM tests"
BUREAU_REQUIRE_VLLM=1 .venv/bin/python -m pytest -q -m "gpu or vllm" -p no:cacheprovider \
  --durations=10 tests/algo tests/inference tests/trainer tests/harness \
  2>&1 | tee "$OUT/tests.log"
grep -q " passed" "$OUT/tests.log" && ! grep -qE "[0-9]+ (failed|error)" "$OUT/tests.log"

# 4. Weight push: NCCL broadcast against a safetensors folder (one GPU: NCCL may refuse a
#    receiver on the same device, and says so; the folder arm runs either way).
say "weight-push bench"
.venv/bin/python bench/gpu_weights.py --gb 1 --rounds 2 2>&1 | tee "$OUT/weights.log"

# 5. `bureau train` on one GPU, with the figures.
say "bureau train on one GPU"
.venv/bin/python scripts/gpu_train_check.py --out "$OUT/train"
say "done"
