"""Where an iteration's advantage goes: correct calls, failed calls in successes, failed calls in failures.

    python benchmarks/anneal_probe.py --seed 12 --from 40 --iterations 51 --anneal
    python benchmarks/anneal_probe.py --config examples/chain4.toml --seed 3 --from 47 --iterations 55 --anneal

Trains method ``rlvp`` on the config (``--anneal`` turns the config's annealing on; ``--floor F``
sets ``anneal_floor``) and, for each iteration from ``--from`` on, prints one JSON line: the
iteration, the process weight, the success rate, failed calls per successful and per failed
episode, and -- under the run's weight and under w = 1, on the same batch -- the advantage summed
over the action tokens outside failed calls (the correct calls), of failed calls inside successful episodes and of failed calls
inside failed episodes, each divided by the batch's action tokens (the token-mean loss's weights).
The run itself is the one ``rlvp-train`` makes with that config and seed (the probe only reads the
batches), so it replays a run of the same machine exactly.  docs/results.md ("The README's main
job") uses it to show why annealing to 0 collapsed solved policies.  A few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    import torch

    from rlvp_dsl.advantages import compute_advantages
    from trainer.batch import pad_batch
    from trainer.config import load_config
    from trainer.loop import train

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="examples/chain4.toml")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--iterations", type=int, default=51)
    ap.add_argument("--from", dest="start", type=int, default=40, help="first iteration to print")
    ap.add_argument("--anneal", action="store_true", help="anneal as the config's [anneal] table says")
    ap.add_argument("--floor", type=float, default=None, help="anneal_floor")
    a = ap.parse_args()
    out = tempfile.mkdtemp(prefix="anneal_probe_")
    cfg = load_config(a.config).replace(
        method="rlvp", seed=a.seed, iterations=a.iterations, out_dir=out, token_page_every=0
    )
    if a.anneal:
        cfg = cfg.replace(anneal=True)
    if a.floor is not None:
        cfg = cfg.replace(anneal_floor=a.floor)

    def on_batch(it, groups, credits, weight):
        if it < a.start:
            return
        batch = [r for g in groups for r in g]  # B = n_groups * G
        _, _, mask = pad_batch(batch)  # (B, T)
        failed = torch.zeros(mask.shape)  # (B, T) 1 on the tokens of failed calls
        for b, r in enumerate(batch):
            for (s, e), ev in zip(r.call_spans, r.episode.calls, strict=True):
                if ev.status != "ok":
                    failed[b, s:e] = 1
        failed = failed * mask
        succ = torch.tensor([r.outcome == 1 for r in batch])  # (B,)

        def per_episode(won: bool) -> float:
            eps = [r for r in batch if (r.outcome == 1) == won]
            return sum(sum(ev.status != "ok" for ev in r.episode.calls) for r in eps) / max(1, len(eps))

        row = {
            "iteration": it,
            "weight": round(weight, 4),
            "success": round(float(succ.float().mean()), 4),
            "failed_calls_per_success": round(per_episode(True), 3),
            "failed_calls_per_failure": round(per_episode(False), 3),
        }
        n = float(mask.sum())
        for w in (weight, 1.0):
            adv = compute_advantages(
                [[r.outcome for r in g] for g in groups],
                credits,
                [[r.call_spans for r in g] for g in groups],
                mask,
                credit_mode="token",
                process_weight=w,
                scale_rewards=cfg.scale_rewards,
                process_norm=cfg.process_norm,
                eps=cfg.adv_eps,
            ).advantages  # (B, T)
            row[f"w={w:.2f}"] = {
                "correct_calls": round(float((adv * (mask - failed)).sum()) / n, 4),
                "failed_calls_in_successes": round(float((adv * failed)[succ].sum()) / n, 4),
                "failed_calls_in_failures": round(float((adv * failed)[~succ].sum()) / n, 4),
            }
        print(json.dumps(row), flush=True)

    train(cfg, progress=False, on_batch=on_batch)


if __name__ == "__main__":
    main()
