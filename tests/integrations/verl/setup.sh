#!/usr/bin/env bash
# Create (or reuse) the verl environment, .venv-verl at the repository root, and install
# the project with its verl and test extras into it.  Sourced by run.sh.
#
# verl 0.9.1 pins transformers < 5.11, so verl gets its own environment.  torch is
# installed first and then held by a constraint: verl's base requirements do not list
# torch, but anything that asks for it unpinned pulls a multi-GB CUDA build.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
venv="${RLVP_VERL_VENV:-$repo/.venv-verl}"
python="${PYTHON:-python3}"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "setup-verl: creating $venv" >&2
  "$python" -m venv "$venv"
fi
# shellcheck disable=SC1091
source "$venv/bin/activate"
stamp="$venv/.rlvp-verl-installed"
if [[ ! -f "$stamp" || "$repo/pyproject.toml" -nt "$stamp" ]]; then
  echo "setup-verl: installing (torch==2.13.0 first, then the project with its verl and test extras)" >&2
  python -m pip install --quiet --upgrade pip
  python -m pip install --quiet "torch==2.13.0"
  python -m pip freeze | grep -i '^torch==' > "$venv/torch-constraint.txt"
  python -m pip install --quiet -c "$venv/torch-constraint.txt" -e "$repo[verl,test]"
  touch "$stamp"
fi
