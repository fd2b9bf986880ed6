#!/usr/bin/env bash
# Create (or reuse) the verl environment, .venv-verl at the repository root, and install
# the project with its verl and test extras into it (torch==2.13.0 first, then held by a
# constraint).  Sourced by run.sh.  verl 0.9.1 pins transformers < 5.11, so verl gets an
# environment of its own; examples/setup.sh does the work.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
RLVP_VENV="${RLVP_VERL_VENV:-$repo/.venv-verl}" RLVP_EXTRAS="verl,test" source "$repo/examples/setup.sh"
