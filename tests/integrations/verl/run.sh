#!/usr/bin/env bash
# The verl integration in its own environment (.venv-verl, set up by setup.sh):
# the plugin check, then the CPU tests (a local Ray cluster included; no GPU, no hub).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
# shellcheck disable=SC1091
source "$repo/tests/integrations/verl/setup.sh"
cd "$repo"
export RAY_AUTH_MODE="${RAY_AUTH_MODE:-disabled}"
python -m rlvp_dsl.integrations.verl --check
exec python -m pytest tests/integrations/verl -p no:cacheprovider "$@"
