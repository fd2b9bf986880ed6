#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment in .venv and install the
# project into it.  Sourced by examples/main.sh and tests/run.sh.
#
# torch is installed first and pinned: an unpinned torch (or installing peft or
# transformers before torch) pulls a multi-GB CUDA build.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${RLVP_VENV:-$repo/.venv}"
python="${PYTHON:-python3}"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "setup: creating $venv" >&2
  "$python" -m venv "$venv"
fi
# shellcheck disable=SC1091
source "$venv/bin/activate"
stamp="$venv/.rlvp-installed"
if [[ ! -f "$stamp" || "$repo/pyproject.toml" -nt "$stamp" ]]; then
  echo "setup: installing (torch==2.13.0 first, then the project with its train, test and trl extras)" >&2
  python -m pip install --quiet --upgrade pip
  python -m pip install --quiet "torch==2.13.0"
  python -m pip freeze | grep -i '^torch==' > "$venv/torch-constraint.txt"  # nothing may replace it
  python -m pip install --quiet -c "$venv/torch-constraint.txt" -e "$repo[train,test,trl]"
  touch "$stamp"
fi
