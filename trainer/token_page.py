"""Credits on tokens: an HTML page of a few rollouts of a batch, each generated token coloured
by the advantage the loss gives it.

`trainer.loop.train` calls `maybe_write` every ``token_page_every`` iterations (and at the
last one) with the very tensors it hands to the loss on the next line: ``advantages``
``[B, T]`` (`rlvp_dsl.advantages.Advantages.advantages`) and the completion mask ``[B, T]``.
Nothing is recomputed.  The page splits each token's advantage into its two parts, read
from the same `Advantages`:

* outcome part: ``A_out[i] * mask[i, t]`` (``Advantages.outcome``, the group-relative term);
* process part: ``A[i, t] - A_out[i] * mask[i, t]`` (the token-attached credit ``w * C[i, t]``
  plus the broadcast assistant-turn credit ``w * u[i]``; 0 everywhere under ``scalar_fold``,
  whose credit is folded into the outcome term).

Tool-output and template tokens (mask 0) are shown greyed: the loss never sees them.  Each
call's span is outlined and labelled with the rule credits that produced its colour.
Pages go to ``out_dir/token_pages/iter_NNNN.html`` with an ``index.html`` that also links the
learning curves and summaries of ``rlvp-train --compare`` (``curves.png``, ``summary.md``,
``summary.json``) where a comparison writes them.
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path
from typing import Callable, Sequence

from rlvp_dsl.attach import CallCredits
from rlvp_dsl.html.model import script_safe_json
from rlvp_dsl.html.render import environment
from trainer.types import Rollout

TEMPLATES = Path(__file__).resolve().parent / "templates"
FOLDER = "token_pages"
#: What `rlvp-train --compare` writes beside the runs (trainer/experiments/compare.py), linked from the index.
COMPARE_OUTPUTS = ("curves.png", "summary.md", "summary.json")


def due(every: int, iteration: int, iterations: int) -> bool:
    """Whether iteration ``iteration`` (0-based) of ``iterations`` writes a page: every
    ``every``-th (``(iteration + 1) % every == 0``) and the last; never when ``every`` is 0."""
    return every > 0 and ((iteration + 1) % every == 0 or iteration == iterations - 1)


def pick_rollouts(batch: Sequence[Rollout], credits: Sequence[CallCredits], count: int, seed: int) -> list[int]:
    """Up to ``count`` batch rows to show, in batch order: rollouts with credit first (shuffled
    with ``seed``), then the others; deterministic for a (seed, batch)."""
    rng = random.Random(seed)
    credited = [i for i, c in enumerate(credits) if any(v != 0 for v in c.values) or c.unattached or c.credits]
    rest = [i for i in range(len(batch)) if i not in set(credited)]
    rng.shuffle(credited)
    rng.shuffle(rest)
    return sorted((credited + rest)[:count])


def _credit_items(credits, event_index: int) -> list[dict]:
    out = []
    for c in credits:
        if c.event_index == event_index:
            out.append(
                {"rule": c.rule, "value": c.value, "reason": c.reason, "location": c.location, "trigger": c.trigger}
            )
    return out


def rollout_view(
    row: int,
    rollout: Rollout,
    cc: CallCredits,
    advantages: Sequence[float],
    mask: Sequence[float],
    outcome_adv: float,
    process_total: float,
    decode: Callable[[Sequence[int]], list[str]] | None,
) -> dict:
    """One rollout as the page shows it.

    Args:
        row: its row in the batch tensors.
        advantages, mask: that row of the loss's ``advantages [B, T]`` and ``mask [B, T]``.
        outcome_adv: ``Advantages.outcome[row]``; process_total: ``Advantages.process[row]``.
        decode: ids -> one text per id (None: the ids are shown).

    Returns:
        ``{"row", "id", "task", "outcome", "outcome_adv", "process_total", "segments", "calls",
        "unattached"}``; ``segments`` is the completion cut into runs of tokens (``call`` = k
        for a call's span, else None), each token ``{"text", "id", "masked", "a", "o", "p"}``
        with ``a`` the loss's advantage, ``o`` its outcome part, ``p = a - o``.
    """
    ids = list(rollout.completion_ids)
    texts = decode(ids) if decode is not None else [f"#{i}" for i in ids]
    n = len(ids)
    tokens = []
    for t in range(n):
        m = float(mask[t]) if t < len(mask) else 0.0
        a = float(advantages[t]) if t < len(advantages) else 0.0
        o = outcome_adv * m
        tokens.append({"text": texts[t], "id": ids[t], "masked": m == 0.0, "a": a, "o": o, "p": a - o})
    call_of = [None] * n
    for k, (start, end) in enumerate(rollout.call_spans):
        for t in range(start, end):
            call_of[t] = k
    segments: list[dict] = []
    for t in range(n):
        if (
            not segments
            or segments[-1]["call"] != call_of[t]
            or (call_of[t] is None and segments[-1]["masked"] != tokens[t]["masked"])
        ):
            segments.append({"call": call_of[t], "masked": tokens[t]["masked"], "tokens": []})
        segments[-1]["tokens"].append(tokens[t])
    calls = []
    for k, event in enumerate(rollout.episode.calls):
        start, end = rollout.call_spans[k]
        items = _credit_items(cc.credits, event.index)
        if not items and cc.values[k]:  # a plain fn(episode) -> list[float] source names no rule
            items = [
                {
                    "rule": "(credit source)",
                    "value": cc.values[k],
                    "reason": "the value the source gave this call",
                    "location": "",
                    "trigger": "fire",
                }
            ]
        on_tokens = [tokens[t]["p"] for t in range(start, end) if not tokens[t]["masked"]]
        calls.append(
            {
                "k": k,
                "event": event.index,
                "tool": event.tool,
                "status": event.status,
                "span": [start, end],
                "value": cc.values[k],
                "credits": items,
                "token_process": on_tokens[0] if on_tokens else 0.0,
            }
        )
    unattached = [item for e in rollout.episode.events if not e.is_call for item in _credit_items(cc.credits, e.index)]
    return {
        "row": row,
        "id": rollout.episode.id,
        "task": rollout.task_id,
        "outcome": rollout.outcome,
        "outcome_adv": outcome_adv,
        "process_total": process_total,
        "segments": segments,
        "calls": calls,
        "unattached": unattached,
        "prompt_len": len(rollout.prompt_ids),
    }


def _compare_root(out_dir: Path) -> Path | None:
    """The folder of ``rlvp-train --compare`` when `out_dir` is one of its runs (``ROOT/<method>/seed<k>``)."""
    return out_dir.parent.parent if re.fullmatch(r"seed-?\d+", out_dir.name) else None


def compare_links(out_dir: Path, page_dir: Path) -> list[dict]:
    """Links (relative to `page_dir`) to the comparison's curves and summaries: those present in
    `out_dir`, and where `out_dir` is a run of a comparison, those it writes when it finishes."""
    links = []
    root = _compare_root(out_dir)
    for folder in [out_dir] + ([root] if root is not None else []):
        for name in COMPARE_OUTPUTS:
            target = folder / name
            if target.exists() or folder == root:
                links.append(
                    {
                        "href": os.path.relpath(target, page_dir),
                        "name": name,
                        "present": target.exists(),
                        "image": name.endswith(".png"),
                    }
                )
    metrics = out_dir / "metrics.jsonl"
    links.append({"href": os.path.relpath(metrics, page_dir), "name": "metrics.jsonl", "present": True, "image": False})
    return links


def page_view(iteration: int, method: str, weight: float, rows: list[dict]) -> dict:
    """The page: its rollouts and the colour scale (the largest |advantage| over their action tokens)."""
    scale = max(
        [
            abs(tok[key])
            for r in rows
            for s in r["segments"]
            for tok in s["tokens"]
            if not tok["masked"]
            for key in ("a", "o", "p")
        ]
        + [1e-9]
    )
    return {"iteration": iteration, "method": method, "weight": weight, "rollouts": rows, "scale": scale}


def colour(value: float, scale: float) -> str:
    """A token's background: green for a positive advantage, red for a negative one, none at 0;
    opacity ``0.15 + 0.7 * sqrt(|value| / scale)``, so that small advantages stay visible."""
    x = max(-1.0, min(1.0, value / scale)) if scale else 0.0
    alpha = round(0.15 + 0.7 * abs(x) ** 0.5, 3) if x else 0.0
    return f"rgba(26,127,55,{alpha})" if x > 0 else (f"rgba(198,40,40,{alpha})" if x < 0 else "transparent")


def render_page(view: dict, links: list[dict]) -> str:
    """The page of `page_view` as HTML text (one self-contained file)."""
    return (
        environment(str(TEMPLATES))
        .get_template("token_page.html.j2")
        .render(page=view, links=links, colour=colour, data_json=script_safe_json({"scale": view["scale"]}))
    )


def write(
    out_dir: str | os.PathLike,
    iteration: int,
    method: str,
    batch: Sequence[Rollout],
    credits: Sequence[CallCredits],
    advantages,
    outcome,
    process,
    mask,
    weight: float,
    *,
    count: int = 4,
    seed: int = 0,
    decode: Callable[[Sequence[int]], list[str]] | None = None,
) -> Path:
    """Write the page of one iteration and refresh the index; returns the page's path.

    Args:
        batch: the ``B`` rollouts of the batch (row order of the tensors); credits: their `CallCredits`.
        advantages: ``[B, T]`` the loss's advantages; mask: ``[B, T]`` its completion mask.
        outcome, process: ``[B]`` `Advantages.outcome` and `Advantages.process`.
        weight: the process weight of the iteration; count: rollouts shown.

    Raises:
        OSError: the folder or the page cannot be written.
    """
    rows_a, rows_m = advantages.detach().cpu().tolist(), mask.detach().cpu().tolist()
    out_a, proc = outcome.detach().cpu().tolist(), process.detach().cpu().tolist()
    picked = pick_rollouts(batch, credits, count, seed * 1_000_003 + iteration)
    rows = [rollout_view(i, batch[i], credits[i], rows_a[i], rows_m[i], out_a[i], proc[i], decode) for i in picked]
    folder = Path(out_dir) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    links = compare_links(Path(out_dir), folder)
    path = folder / f"iter_{iteration:04d}.html"
    path.write_text(render_page(page_view(iteration, method, weight, rows), links), encoding="utf-8")
    pages = sorted(p.name for p in folder.glob("iter_*.html"))
    index = (
        environment(str(TEMPLATES))
        .get_template("token_index.html.j2")
        .render(pages=pages, links=links, method=method, out_dir=str(out_dir))
    )
    (folder / "index.html").write_text(index, encoding="utf-8")
    return path


def maybe_write(
    cfg,
    iteration: int,
    batch: Sequence[Rollout],
    credits: Sequence[Sequence[CallCredits]],
    adv,
    mask,
    weight: float,
    decode=None,
    log: Callable[[str], None] | None = None,
) -> Path | None:
    """`write` when iteration ``iteration`` is `due` under ``cfg.token_page_every``; a page that
    cannot be written is said through `log` and never stops the run.

    Args:
        adv: the iteration's `rlvp_dsl.advantages.Advantages` (its ``advantages [B, T]`` go to the loss).
        mask: the ``[B, T]`` completion mask that goes to the loss.
        credits: ``[n_groups][G]``, group-major like the batch.
    """
    if not due(cfg.token_page_every, iteration, cfg.iterations):
        return None
    flat = [c for group in credits for c in group]
    try:
        return write(
            cfg.out_dir,
            iteration,
            cfg.method,
            batch,
            flat,
            adv.advantages,
            adv.outcome,
            adv.process,
            mask,
            weight,
            count=cfg.token_page_rollouts,
            seed=cfg.seed,
            decode=decode,
        )
    except OSError as exc:
        if log is not None:
            log(
                f"iteration {iteration}: the token page was not written ({exc.strerror or exc}: "
                f"{exc.filename or cfg.out_dir})"
            )
        return None
