#!/usr/bin/env bash
# The main job: derive rules from the tau2 airline tool catalogue, compile the
# stock rules, score real agent trajectories with per-call process credit and
# print the summary; then train rlvp against outcome-only grpo on chain-4 and
# print the comparison table (and write the learning-curve plot).
#
#   bash examples/main.sh [DATA_DIR]
#
# DATA_DIR defaults to ../shared/data when it exists; otherwise the small example
# episodes and manifest in examples/ are used, so this runs on any fresh machine.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
source "$repo/examples/setup.sh"
cd "$repo"

data="${1:-}"
if [[ -z "$data" && -d "$repo/../shared/data" ]]; then
  data="$repo/../shared/data"
fi
if [[ -n "$data" ]]; then
  [[ -d "$data" ]] || { echo "main: no such data folder: $data" >&2; exit 2; }
  manifest="$data/tau2/airline/tools_manifest.json"
  trajectories=("$data/tau2_simulations" "$data/tau_bench_v1")
else
  echo "main: ../shared/data not found; using the example episodes in examples/episodes" >&2
  manifest="examples/manifests/airline_tools.json"
  trajectories=("examples/episodes")
fi
mkdir -p build

echo "== 1. derive rules from the tool catalogue: $manifest"
rlvp-compile --auto-from-tags "$manifest" -o build/airline_derived.rlvp
sed -n '1,200p' build/airline_derived.rlvp | grep -v '^\s*$' | head -40

echo
echo "== 2. check and compile the stock rules and the derived rules"
rlvp-compile rules/*.rlvp build/airline_derived.rlvp

for rules in rules/tau2_airline.rlvp build/airline_derived.rlvp; do
  echo
  echo "== 3. score ${trajectories[*]} with $rules"
  rlvp-score "$rules" "${trajectories[@]}"
done

echo
echo "== 4. example episodes explained credit by credit"
rlvp-score rules/tau2_airline.rlvp examples/episodes/airline_chat.jsonl --explain --limit 2 | head -40

echo
echo "== 5. train: rlvp vs outcome-only grpo on chain-4 with the embedded tiny model (2 minutes on 2 idle cores, longer when they are busy)"
rlvp-train examples/chain4.toml --compare grpo,rlvp --seeds 0,1,2 --jobs 2 --out runs/compare
echo
echo "learning curves: runs/compare/curves.png   summary: runs/compare/summary.md, runs/compare/summary.json"
