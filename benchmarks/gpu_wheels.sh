#!/usr/bin/env bash
# Download the wheels the GPU check needs into .whl/ (run here, where pip reaches PyPI).
#
#   bash benchmarks/gpu_wheels.sh                 # then: bash benchmarks/gpu_check.sh on the GPU machine
#   WITH_TRANSFORMERS=1 bash benchmarks/gpu_wheels.sh   # also carry our tested transformers (a fallback)
#
# The GPU machine (H200: CPython 3.12, x86_64 manylinux, no registry) already has torch,
# transformers, peft, accelerate, attrs, pandas, pyarrow, xxhash, fsspec, huggingface-hub, jinja2,
# psutil, pyyaml, tqdm, click and rich (/work/.library/device/KINDS.md).  It lacks TRL and what
# TRL and rlvp need beside those: datasets (with dill, multiprocess), lark and interegular.
# rlvp itself travels as the working tree (PYTHONPATH=.).  Everything that travels must stay
# under 64 MiB, so the total is printed and checked.
set -euo pipefail
cd "$(dirname "$0")/.."

WHEELS=(
  trl==1.16.0            # the `trl` extra's pin (rlvp_dsl.integrations.trl is tested with 1.16)
  datasets==5.2.0        # TRL imports it at module level
  dill==0.4.1            # datasets' needs (datasets pins dill < 0.4.2, multiprocess < 0.70.20)
  multiprocess==0.70.19
  lark==1.3.1            # rlvp_dsl's parser ...
  interegular==0.3.3     # ... and lark's strict-mode collision check
  bfcl-eval==2026.3.23   # BFCL v4 data, backends and checker (gpu_check.py --only bfcl; pure Python, 1.9 MiB)
  mpmath==1.3.0          # the BFCL backends' one dependency (the machine may have it; it is small)
)
if [ "${WITH_TRANSFORMERS:-0}" = 1 ]; then
  WHEELS+=(transformers==5.24.0)  # the version the tests run with here (the machine has 5.17)
fi

PLATFORMS=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  PLATFORMS+=(--platform "$p")
done

grep -qxF '/.whl/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.whl/' >> .git/info/exclude; }
rm -rf .whl && mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${PLATFORMS[@]}" -d .whl "${WHEELS[@]}"

ls -l .whl/*.whl | awk '{printf "%10d  %s\n", $5, $NF}'
total=$(cat .whl/*.whl | wc -c)
printf 'total: %d bytes (%.1f MiB) in %d wheels\n' "$total" "$(echo "$total / 1048576" | bc -l)" "$(ls .whl/*.whl | wc -l)"
if [ "$total" -gt $((32 * 1048576)) ]; then
  echo "error: the wheels are over 32 MiB; with the working tree they must stay under 64 MiB" >&2
  exit 1
fi
