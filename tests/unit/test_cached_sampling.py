"""The batched, KV-cached rollout path (`CachedSampler`) against the re-feed path (`HFGenerator`).

Same seeds give the same sampled ids, masks, spans, allowed ids and events; batching every
group together gives each group what it gets alone; the cache (with its padding holes) gives
a row the logits of an unpadded full forward pass; the sampler's log-probs are the trainer's.
"""

from __future__ import annotations

import pytest
import torch

from trainer.sampling import rollout as rollout_mod
from trainer.envs import env_factory, make_env, make_tasks
from trainer.sampling.generation import CachedSampler, GenConfig, HFGenerator
from trainer.logprobs import completion_logprobs
from trainer.model import TinyModelConfig, apply_lora, build_tiny_model
from trainer.sampling.rollout import collect_group, collect_groups, prompt_words
from trainer.sampling.tokenizer import build_tiny_tokenizer

from tolerance import assert_close, tolerance, transformer_terms

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny():
    styles = ("plain", "json")
    tok = build_tiny_tokenizer(
        prompt_words(make_env("gated"), styles) | prompt_words(make_env("dialog3"), styles) | {"hmm", "so"}
    )
    return apply_lora(build_tiny_model(tok, TinyModelConfig(seed=0))), tok


def _qwen2(tok):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    return Qwen2ForCausalLM(cfg).eval()


def _same(a, b):
    assert len(a) == len(b)
    for ga, gb in zip(a, b, strict=True):
        for x, y in zip(ga, gb, strict=True):
            assert x.completion_ids == y.completion_ids
            assert x.completion_mask == y.completion_mask
            assert x.call_spans == y.call_spans
            assert x.allowed_ids == y.allowed_ids
            assert [(e.kind, e.tool, e.status, e.result, e.text) for e in x.episode.events] == [
                (e.kind, e.tool, e.status, e.result, e.text) for e in y.episode.events
            ]


@pytest.mark.parametrize(
    "env_name,knobs,cfg",
    [
        ("chain4", {}, GenConfig()),
        ("gated", {}, GenConfig(temperature=0.7)),
        ("chain4", {}, GenConfig(temperature=0)),
        ("chain4", {}, GenConfig(max_new_tokens=2)),
        ("gated", {}, GenConfig(think_max_tokens=2, call_style="json")),
        # conversations: per-task call masks (one batch per task) ...
        ("dialog", {}, GenConfig()),
        ("dialog3", {"max_calls_per_turn": 2}, GenConfig(think_max_tokens=2, call_style="json")),
        # ... and one mask for every task (all groups in one batch; rows answer and end at different rounds)
        ("dialog3", {"num_values": 1, "vary_values": False}, GenConfig(temperature=0.7)),
    ],
)
def test_cached_batched_rollouts_equal_the_refed_ones(tiny, env_name, knobs, cfg):
    """All groups in one cached batch == each group alone through `generate`, same seeds."""
    model, tok = tiny
    factory, tasks, seeds = env_factory(env_name, **knobs), make_tasks(3, seed=4), [11, 12, 13]
    refed = [collect_group(HFGenerator(model, tok), tok, factory, t, 4, cfg, seed=s) for t, s in zip(tasks, seeds)]
    cached = collect_groups(model, tok, factory, tasks, 4, cfg, seeds)
    _same(cached, refed)
    alone = [collect_group(model, tok, factory, t, 4, cfg, seed=s) for t, s in zip(tasks, seeds)]
    _same(cached, alone)
    assert cfg.temperature == 0 or len({tuple(r.completion_ids) for g in cached for r in g}) > 1
    if env_name.startswith("dialog"):  # the conversations did answer, reach later user turns and end apart
        kinds = [[e.kind for e in r.episode.events] for g in cached for r in g]
        assert all("assistant" in k for k in kinds) and any(k.count("user") > 1 for k in kinds)
        assert len({len(k) for k in kinds}) > 1


def test_a_qwen2_model_gives_the_same_rollouts_both_ways(tiny):
    _, tok = tiny
    model = _qwen2(tok)
    factory, tasks = env_factory("chain4", max_turns=6), make_tasks(2)
    refed = [
        collect_group(HFGenerator(model, tok), tok, factory, t, 3, GenConfig(), seed=s) for t, s in zip(tasks, [5, 6])
    ]
    _same(collect_groups(model, tok, factory, tasks, 3, GenConfig(), [5, 6]), refed)


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_cache_with_holes_gives_a_row_its_unpadded_logits(tiny, kind):
    """Rows fed in chunks of different widths (left-padded) and with masked pads between them
    get, at every fed token, the logits of that row's sequence run alone and unpadded."""
    model, tok = tiny
    model = model if kind == "llama" else _qwen2(tok)
    g = torch.Generator().manual_seed(0)
    seqs = [torch.randint(3, len(tok), (n,), generator=g).tolist() for n in (9, 4, 13)]
    cuts = [[3, 4, 6, 9], [1, 1, 1, 4], [5, 7, 8, 13]]  # equal cuts: an empty chunk (a masked pad)
    sampler = CachedSampler(model, tok, len(seqs))
    got = [[] for _ in seqs]
    with torch.no_grad():
        prev = [0] * len(seqs)
        for step in range(len(cuts[0])):
            chunks = [s[p : c[step]] for s, p, c in zip(seqs, prev, cuts, strict=True)]
            logits = sampler._forward(chunks)
            for r, chunk in enumerate(chunks):
                if chunk:
                    got[r].append(logits[r])
            prev = [c[step] for c in cuts]
        for r, s in enumerate(seqs):
            full = model(input_ids=torch.tensor([s])).logits[0].float()
            want = full[[c - 1 for k, c in enumerate(cuts[r]) if k == 0 or c > cuts[r][k - 1]]]
            # a cache filled chunk by chunk (with holes) vs one pass: attention sums in other orders
            assert_close(torch.stack(got[r]), want, n=transformer_terms(model, len(s)), what=f"row {r} logits")


@pytest.mark.parametrize("cfg", [GenConfig(temperature=0.8), GenConfig(think_max_tokens=2)])
def test_sampled_logprobs_are_the_trainers(tiny, cfg):
    """Teacher forcing: the trainer's log-probs of the cached path's rollouts equal the sampler's
    (under the call mask; forced tokens 0).  With a reasoning segment: the call tokens still
    agree (no top-k or top-p of the model's generation config sneaks into sampling); the free
    reasoning tokens are sampled under the reasoning vocabulary but recorded as unconstrained
    (allowed None), so the trainer's full-vocabulary log-prob is lower there."""
    model, tok = tiny
    seen = {}
    real_play = rollout_mod._Group.play

    def recording(self, ep, sample, turn):
        seen[(id(ep), len(ep.ids))] = sample
        return real_play(self, ep, sample, turn)

    rollout_mod._Group.play = recording
    try:
        eps = {}
        real_finish = rollout_mod._Group.rollouts

        def keep_eps(self):
            out = real_finish(self)
            for ep, r in zip(self.episodes, out, strict=True):
                eps[id(r)] = ep
            return out

        rollout_mod._Group.rollouts = keep_eps
        groups = collect_groups(model, tok, env_factory("chain4", max_turns=5), make_tasks(2), 3, cfg, [1, 2])
    finally:
        rollout_mod._Group.play = real_play
        rollout_mod._Group.rollouts = real_finish
    for r in (r for g in groups for r in g):
        ep = eps[id(r)]
        samples = [s for (key, offset), s in sorted(seen.items(), key=lambda kv: kv[0][1]) if key == id(ep)]
        with torch.no_grad():
            logp, _ = completion_logprobs(model, [r], tok.pad_token_id, temperature=cfg.temperature)
        gen = torch.tensor(r.completion_mask, dtype=torch.bool)
        want = torch.tensor([x for s in samples for x in s.logprobs])
        called = torch.tensor([a is not None for a, m in zip(r.allowed_ids, r.completion_mask) if m])
        n = transformer_terms(model, len(r.prompt_ids) + len(r.completion_ids))  # cached turns vs one pass
        assert_close(logp[0][gen][called], want[called], n=n, what="log-probs under the call mask")
        assert bool(called.all()) != bool(cfg.think_max_tokens)
        assert torch.all(logp[0][gen][~called] <= want[~called] + tolerance(n) * want.abs().max())


def test_forced_steps_run_no_forward_pass(tiny):
    """One row: after the first step, a token with a single allowed id is drawn without logits
    (policy log-prob NaN, masked log-prob 0); every other token has both."""
    import math

    from trainer.sampling.call_grammar import CallTrie
    from trainer.sampling.tokenizer import encode

    model, tok = tiny
    trie = CallTrie.build(make_env("gated").schema(), tok)
    sampler = CachedSampler(model, tok, 1)
    calls = []
    real = sampler._forward
    sampler._forward = lambda chunks: calls.append(len(chunks[0])) or real(chunks)
    (s,) = sampler.sample_turn(
        [encode(tok, "<|user|> fetch k0 <|end|> <|assistant|>")],
        trie,
        GenConfig(),
        [([0], torch.Generator().manual_seed(0))],
    )
    forced = [a is not None and len(a) == 1 for a in s.allowed]
    assert s.ended_with_eos and forced[-1] and any(forced)
    for t, (lp, raw) in enumerate(zip(s.logprobs, s.policy_logprobs, strict=True)):
        assert math.isnan(raw) == (t > 0 and forced[t])
        assert (lp == 0.0) == forced[t]
    assert len(calls) == 1 + sum(not f for f in forced[1:])  # the prompt, then one pass per free step
    last_free = max((t for t in range(1, len(forced)) if not forced[t]), default=0)
    assert sampler.unfed[0] == s.ids[last_free:]  # drawn after the last pass: fed with the next turn
