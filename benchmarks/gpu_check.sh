#!/usr/bin/env bash
# The GPU check (issue 8), on one GPU machine, from the repository root, under 10 minutes:
#
#   bash benchmarks/gpu_wheels.sh        # first, where pip reaches PyPI: trl and friends into .whl/
#   bash benchmarks/gpu_check.sh         # then, on the GPU machine (.whl/ travels with the tree)
#   bash benchmarks/gpu_check.sh --only bfcl   # the BFCL run instead (under 8 minutes in all)
#
# Installs the carried wheels into /tmp/site (no registry there), prints the versions and the
# GPU, runs the device tests (tests/unit/test_train_device.py: one tiny iteration on cuda), then
# benchmarks/gpu_check.py (our trainer rlvp vs grpo on chain-4 and TRL stock vs RlvpGRPOTrainer,
# ~400 M parameters, bf16: step time, tokens/s, peak GPU memory).  Extra arguments go to
# gpu_check.py (e.g. --only trl, --iterations 6).  Output also lands in runs/gpu_check/log.txt,
# the numbers in runs/gpu_check/summary.json.
#
# --only bfcl: grpo vs rlvp on BFCL v4 multi-turn (examples/bfcl.toml, the ~400 M model built in
# code: SmolLM2's 94 MiB wheel cannot travel), within gpu_check.py's --bfcl-budget-s (330 s of
# training).  It needs bfcl-eval's wheel in .whl/ (mpmath and filelock are on the machine):
#   python3 -m pip download -q --no-deps -d .whl "bfcl-eval==2026.3.23"     # 1.9 MiB, py3-none-any
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p runs/gpu_check
exec > >(tee runs/gpu_check/log.txt) 2>&1
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false TRL_EXPERIMENTAL_SILENCE=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
start=$SECONDS

if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "error: installing the wheels in .whl/ failed" >&2; exit 2; }
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
else
  echo "note: no wheels in .whl/ (bash benchmarks/gpu_wheels.sh makes them); using what is installed"
fi
export PYTHONPATH=.:${PYTHONPATH:-}

echo "# environment ($(date -u +%FT%TZ))"
python3 - <<'PY'
import importlib.metadata as md, sys
import torch
print("python", sys.version.split()[0], sys.executable)
for name in ("torch", "transformers", "peft", "accelerate", "trl", "datasets", "lark", "interegular", "attrs",
             "bfcl-eval", "mpmath", "filelock"):
    try:
        print(f"  {name} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"  {name} MISSING")
print("  torch CUDA", torch.version.cuda, "available:", torch.cuda.is_available())
PY
nvidia-smi -L || echo "nvidia-smi: not available"

echo; echo "# device tests (tests/unit/test_train_device.py)"
timeout -k 10 100 python3 -m pytest -q -p no:cacheprovider tests/unit/test_train_device.py
tests=$?

echo; echo "# benchmarks/gpu_check.py $*"
timeout -k 10 450 python3 benchmarks/gpu_check.py "$@"
check=$?
[ $check -eq 124 ] && echo "error: gpu_check.py ran past its 450 s limit" >&2
echo; echo "gpu_check.sh: device tests exit $tests, gpu_check.py exit $check, $((SECONDS - start)) s in all"
exit $((tests != 0 || check != 0))
