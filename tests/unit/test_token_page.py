"""The token page (trainer/token_page.py): written from the tensors the loss receives, by value."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch
from trainer_fakes import credits_of, fake_backend, make_rollout

from rlvp_dsl.attach import score_calls
from rlvp_dsl.events import Credit
from trainer import loop, token_page
from rlvp_dsl.advantages import compute_advantages
from trainer.batch import pad_batch
from trainer.config import ConfigError, TrainConfig

torch.set_num_threads(1)


class _Tokens(HTMLParser):
    """Collects, per section data-row, the tokens (data-a/o/p, masked) and the call spans."""

    def __init__(self):
        super().__init__()
        self.rows: dict[int, list[dict]] = {}
        self.calls: dict[int, list[dict]] = {}
        self._row = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "section" and "rollout" in classes:
            self._row = int(a["data-row"])
            self.rows[self._row], self.calls[self._row] = [], []
        elif tag == "span" and "tok" in classes:
            self.rows[self._row].append(
                {"masked": "masked" in classes, **{k: float(a[f"data-{k}"]) for k in "aop" if f"data-{k}" in a}}
            )
        elif tag == "span" and "call" in classes:
            self.calls[self._row].append(
                {"k": int(a["data-call"]), "credited": "credited" in classes, "value": float(a["data-value"])}
            )


def _parse(path: Path) -> _Tokens:
    parser = _Tokens()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_the_page_shows_the_advantages_and_mask_the_loss_receives(tmp_path, monkeypatch):
    seen = {}
    update = loop.update_policy

    def spy(cfg, learner, batch, advantages, cmask, *, step):
        seen[len(seen)] = (advantages.clone(), cmask.clone(), [r.episode.id for r in batch])
        return update(cfg, learner, batch, advantages, cmask, step=step)

    monkeypatch.setattr(loop, "update_policy", spy)
    cfg = TrainConfig(
        iterations=2,
        tasks_per_iteration=2,
        num_generations=4,
        out_dir=str(tmp_path),
        micro_batch=8,
        token_page_every=1,
        token_page_rollouts=3,
    )
    loop.train(cfg, backend=fake_backend(), progress=False)
    pages = sorted((tmp_path / "token_pages").glob("iter_*.html"))
    assert [p.name for p in pages] == ["iter_0000.html", "iter_0001.html"]
    for it, page in enumerate(pages):
        advantages, cmask, _ = seen[it]
        parsed = _parse(page)
        assert len(parsed.rows) == 3
        for row, tokens in parsed.rows.items():
            n = len(tokens)
            assert [t["masked"] for t in tokens] == [m == 0 for m in cmask[row, :n].tolist()]
            shown = [t["a"] for t in tokens if not t["masked"]]
            assert shown == [a for a, m in zip(advantages[row, :n].tolist(), cmask[row, :n].tolist()) if m]
            for t in tokens:
                if not t["masked"]:
                    assert t["o"] + t["p"] == pytest.approx(t["a"], abs=1e-6)
    index = (tmp_path / "token_pages" / "index.html").read_text()
    assert 'href="iter_0000.html"' in index and 'href="iter_0001.html"' in index and "metrics.jsonl" in index


def _batch():
    rs = [
        make_rollout("a", [2, 3], 1.0),
        make_rollout("a", [2], 0.0),
        make_rollout("b", [1, 1], 0.0),
        make_rollout("b", [2, 2], 0.0),
    ]
    cs = [credits_of([0.5, -0.25]), credits_of([0.0]), credits_of([0.0, 0.0]), credits_of([-1.0, 0.0])]
    return rs, cs


def test_process_part_is_the_weighted_call_credit_and_outcome_part_the_group_advantage(tmp_path):
    rs, cs = _batch()
    _, _, cmask = pad_batch(rs)
    adv = compute_advantages(
        [[r.outcome for r in rs[:2]], [r.outcome for r in rs[2:]]],
        [cs[:2], cs[2:]],
        [[r.call_spans for r in rs[:2]], [r.call_spans for r in rs[2:]]],
        cmask,
        credit_mode="token",
        process_weight=0.5,
    )
    path = token_page.write(tmp_path, 7, "rlvp", rs, cs, adv.advantages, adv.outcome, adv.process, cmask, 0.5, count=4)
    parsed = _parse(path)
    row0 = parsed.rows[0]  # call 0: tokens 0-1 (+0.5 * 0.5), tool output 2-3, call 1: tokens 4-6 (-0.25 * 0.5)
    assert [t["masked"] for t in row0] == [False, False, True, True, False, False, False, True, True]
    assert [t["p"] for t in row0 if not t["masked"]] == pytest.approx([0.25, 0.25, -0.125, -0.125, -0.125])
    assert float(adv.outcome[0]) > 0  # the success of group a
    assert [t["o"] for t in row0 if not t["masked"]] == pytest.approx([float(adv.outcome[0])] * 5)
    # group b is all failures: outcome part 0, the process part alone colours the tokens
    assert [t["a"] for t in parsed.rows[3] if not t["masked"]] == pytest.approx([-0.5, -0.5, 0.0, 0.0])
    assert [(c["k"], c["credited"]) for c in parsed.calls[0]] == [(0, True), (1, True)]
    assert [(c["k"], c["credited"]) for c in parsed.calls[2]] == [(0, False), (1, False)]


def test_call_credits_name_their_rules():
    rs, _ = _batch()
    episode = rs[0].episode
    credits = [
        Credit(0, "stage_done", 1.0, "r.rlvp:15:1", "new best", "progress"),
        Credit(1, "failed_call", -0.25, "r.rlvp:7:1", "failed", "violation"),
    ]
    cc = score_calls(type("P", (), {"score": lambda self, e: credits})(), episode)
    view = token_page.rollout_view(0, rs[0], cc, [1.0] * 9, rs[0].completion_mask, 0.0, 0.75, decode=None)
    assert [[x["rule"] for x in c["credits"]] for c in view["calls"]] == [["stage_done"], ["failed_call"]]
    assert [s["call"] for s in view["segments"]] == [0, None, 1, None]
    assert view["segments"][0]["tokens"][0]["text"] == "#10"


@pytest.mark.parametrize(
    "every, iterations, expected",
    [
        (20, 4, [3]),
        (2, 5, [1, 3, 4]),
        (1, 3, [0, 1, 2]),
        (0, 5, []),
    ],
)
def test_pages_are_due_every_k_iterations_and_at_the_last(every, iterations, expected):
    assert [it for it in range(iterations) if token_page.due(every, it, iterations)] == expected


def test_picked_rollouts_prefer_credit_and_are_deterministic():
    rs, cs = _batch()
    picked = token_page.pick_rollouts(rs, cs, 2, seed=3)
    assert picked == token_page.pick_rollouts(rs, cs, 2, seed=3)
    assert set(picked) == {0, 3}  # the two rollouts with credit
    assert token_page.pick_rollouts(rs, cs, 9, seed=3) == [0, 1, 2, 3]


def test_a_comparison_run_links_the_curves_it_will_write(tmp_path):
    run = tmp_path / "compare" / "rlvp" / "seed0"
    pages = run / "token_pages"
    links = {link["name"]: link for link in token_page.compare_links(run, pages)}
    assert links["curves.png"]["href"] == "../../../curves.png" and not links["curves.png"]["present"]
    assert set(links) == {"curves.png", "summary.md", "summary.json", "metrics.jsonl"}
    alone = tmp_path / "single"
    (alone / "curves.png").parent.mkdir()
    (alone / "curves.png").write_bytes(b"")
    names = [link["name"] for link in token_page.compare_links(alone, alone / "token_pages")]
    assert names == ["curves.png", "metrics.jsonl"]


def test_token_page_fields_are_checked():
    with pytest.raises(ConfigError, match="token_page_every"):
        TrainConfig(token_page_every=-1)
    with pytest.raises(ConfigError, match="token_page_rollouts"):
        TrainConfig(token_page_rollouts=0)
