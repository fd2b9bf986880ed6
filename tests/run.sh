#!/usr/bin/env bash
# Run the whole test suite, setting up .venv first if needed.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
source "$repo/examples/setup.sh"
cd "$repo"
exec python -m pytest tests -rs "$@"   # -rs: say why a test was skipped (no ../shared, no verl here)
