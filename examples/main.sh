#!/usr/bin/env bash
# The main job: derive rules from the tau2 airline tool catalogue, compile the
# stock rules, score real agent trajectories with per-call process credit and
# print the summary; then train rlvp against outcome-only grpo on chain-4 and
# print the comparison table (and write the learning-curve plot).
#
#   bash examples/main.sh [DATA_DIR]
#
# DATA_DIR holds the real data in this layout (examples/data/README.md says where
# the public files come from):
#
#   DATA_DIR/tau2/airline/tools_manifest.json   the airline tool catalogue (tau2 format)
#   DATA_DIR/tau2_simulations/**/*.json         tau2-bench Results files (any domain; airline is scored)
#   DATA_DIR/tau_bench_v1/**/*.json             tau-bench v1 results lists (optional)
#
# It defaults to ../shared/data when that exists, and otherwise to examples/data,
# the small real samples shipped with the repository, so it runs on a fresh clone.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

data="${1:-}"
if [[ -n "$data" && -d "$data" ]]; then
  data="$(cd "$data" && pwd)"  # relative to where the job was started, not to the repository
fi
cd "$repo"
if [[ -z "$data" ]]; then
  if [[ -d "$repo/../shared/data" ]]; then
    data="$repo/../shared/data"
  else
    data="examples/data"
    echo "main: ../shared/data not found; using the small real samples in examples/data" >&2
  fi
fi
[[ -d "$data" ]] || { echo "main: no such data folder: $data" >&2; exit 2; }
manifest="$data/tau2/airline/tools_manifest.json"
if [[ ! -f "$manifest" ]]; then
  echo "main: $data has no tau2/airline/tools_manifest.json; the layout is described at the top of examples/main.sh" >&2
  exit 2
fi
trajectories=()
for sub in tau2_simulations tau_bench_v1; do
  [[ -d "$data/$sub" ]] && trajectories+=("$data/$sub")
done
if [[ ${#trajectories[@]} -eq 0 ]]; then
  echo "main: $data has neither tau2_simulations/ nor tau_bench_v1/; the layout is described at the top of examples/main.sh" >&2
  exit 2
fi
# set up only once the data folder is known to be usable (set-up takes minutes the first time)
setup_start=$SECONDS
# shellcheck disable=SC1091
source "$repo/examples/setup.sh"
cd "$repo"
mkdir -p build

took() {  # the seconds a step took, as measured now
  local s=$(( SECONDS - $1 ))
  if (( s >= 60 )); then printf '%d min %02d s' $(( s / 60 )) $(( s % 60 )); else printf '%d s' "$s"; fi
}
setup_took="$(took "$setup_start")"
job_start=$SECONDS

echo "== 1. derive rules from the tool catalogue: $manifest"
rlvp-compile --auto-from-tags "$manifest" -o build/airline_derived.rlvp
sed -n '1,200p' build/airline_derived.rlvp | grep -v '^\s*$' | head -40

echo
echo "== 2. check and compile the stock rules and the derived rules"
rlvp-compile rules/*.rlvp build/airline_derived.rlvp

for rules in rules/tau2_airline.rlvp build/airline_derived.rlvp; do
  echo
  echo "== 3. score the airline episodes of ${trajectories[*]} with $rules"
  rlvp-score "$rules" "${trajectories[@]}" --domain airline
done

echo
echo "== 4. example episodes explained credit by credit"
rlvp-score rules/tau2_airline.rlvp examples/episodes/airline_chat.jsonl --explain --limit 2
echo "(steps 1-4 took $(took "$job_start"))"

echo
echo "== 5. train: rlvp vs outcome-only grpo on chain-4 with the embedded tiny model, 5 seeds each, 2 at a time"
echo "   (CPU-bound: each run prints when it is done; the step's time is printed at its end)"
train_start=$SECONDS
# --overwrite: a rerun of the main job replaces its own earlier comparison (rlvp-train refuses
# a folder that holds a run otherwise); only the files the trainer wrote there are removed.
# 5 seeds: the table gives each column's median [min-max] over them; one seed's exact numbers
# differ from machine to machine (float summation order), the medians should not.
rlvp-train examples/chain4.toml --compare grpo,rlvp --seeds 0,1,2,3,4 --jobs 2 --out runs/compare --overwrite
echo
echo "step 5 took $(took "$train_start") on $(nproc --all 2>/dev/null || echo '?') cores; steps 1-5 $(took "$job_start"), after a set-up of $setup_took"
echo "learning curves: runs/compare/curves.png   summary: runs/compare/summary.md, runs/compare/summary.json"
