#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment in .venv and install the
# project into it.  Sourced by examples/main.sh and tests/run.sh.
#
# torch is installed first and pinned: an unpinned torch (or installing peft or
# transformers before torch) pulls whatever build the index serves.  From PyPI on
# Linux x86-64 that is a CUDA build with several GB of nvidia-* wheels, even on a
# machine without a GPU; TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu gets
# the CPU build (a 190 MB wheel) there.  The build it got is printed.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${RLVP_VENV:-$repo/.venv}"
extras="${RLVP_EXTRAS:-train,test,trl,fast,bfcl,serve,atif,tinker,verifiers,atropos,ray,lsp}"  # tests/integrations/verl/setup.sh: verl,test in .venv-verl
python="${PYTHON:-python3}"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "setup: creating $venv" >&2
  "$python" -m venv "$venv"
fi
# shellcheck disable=SC1091
source "$venv/bin/activate"
stamp="$venv/.rlvp-installed"
if [[ ! -f "$stamp" || "$repo/pyproject.toml" -nt "$stamp" ]]; then
  echo "setup: installing in $venv (torch==2.13.0 first, then the project with its $extras extras; a few minutes)" >&2
  python -m pip install --quiet --upgrade pip
  if [[ -n "${TORCH_INDEX_URL:-}" ]]; then
    python -m pip install --quiet "torch==2.13.0" --index-url "$TORCH_INDEX_URL"
  else
    python -m pip install --quiet "torch==2.13.0"
  fi
  RLVP_VENV_SHOWN="$venv" python -W ignore - <<'PY' >&2  # -W ignore: numpy is not installed yet
import os
import torch
build = f"CUDA {torch.version.cuda} build" if torch.version.cuda else "CPU build"
print(f"setup: torch {torch.__version__} ({build})"
      + ("" if not torch.version.cuda else f"; for the CPU build: rm -r {os.environ['RLVP_VENV_SHOWN']}, then "
         "TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu bash examples/main.sh"))
PY
  python -m pip freeze | grep -i '^torch==' > "$venv/torch-constraint.txt"  # nothing may replace it
  python -m pip install --quiet -c "$venv/torch-constraint.txt" -e "$repo[$extras]"
  if [[ ",$extras," == *",bfcl,"* ]]; then
    # BFCL v4's data, backends and checker (trainer/envs/bfcl); --no-deps: its declared
    # dependencies are LLM clients and ML stacks the environment never imports (pyproject.toml).
    python -m pip install --quiet -c "$venv/torch-constraint.txt" --no-deps "bfcl-eval==2026.3.23" "mpmath>=1.3"
  fi
  if [[ ",$extras," == *",atropos,"* ]]; then
    # atropos' ScoredDataGroup and API server (rlvp_dsl.integrations.atropos); --no-deps: its declared
    # dependencies (wandb, datasets, polars, ...) serve its own environments and trainer (pyproject.toml).
    python -m pip install --quiet -c "$venv/torch-constraint.txt" --no-deps "atroposlib==0.4.*"
  fi
  touch "$stamp"
fi
