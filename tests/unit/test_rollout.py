"""Constrained generation and group rollouts: well-formed calls, aligned tokens, events, determinism."""

from __future__ import annotations

import pytest
import torch

from rlvp_dsl.events import ERROR, MALFORMED, OK
from trainer.envs import env_factory, make_env, make_tasks
from trainer.sampling.call_grammar import CallFormat, CallTrie
from trainer.sampling.generation import GenConfig, HFGenerator, TurnSample
from trainer.logprobs import completion_logprobs
from trainer.model import TinyModelConfig, build_tiny_model
from trainer.sampling.rollout import collect_group, prompt_words
from trainer.sampling.tokenizer import ChatFormat, build_tiny_tokenizer, encode

from tolerance import assert_close, transformer_terms

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny():
    tok = build_tiny_tokenizer(prompt_words(make_env("gated"), ("plain", "json")))
    return build_tiny_model(tok, TinyModelConfig(seed=0)), tok


def check_invariants(rollout, tok, trie):
    """Lengths agree, spans lie inside generated tokens and decode to the call, outputs are mask 0."""
    n = len(rollout.completion_ids)
    assert len(rollout.completion_mask) == n == len(rollout.allowed_ids)
    assert len(rollout.call_spans) == len(rollout.episode.calls) == rollout.info["num_turns"]
    previous_end = 0
    calls = zip(rollout.call_spans, rollout.episode.calls, rollout.info["call_texts"], strict=True)
    for (start, end), event, text in calls:
        assert previous_end <= start < end <= n
        assert all(rollout.completion_mask[t] == 1 for t in range(start, end))
        assert tok.decode(rollout.completion_ids[start:end]) == text
        if event.status != MALFORMED:
            assert text in trie.texts and trie.calls[trie.texts.index(text)].tool == event.tool
        previous_end = end
    for t, (m, allowed) in enumerate(zip(rollout.completion_mask, rollout.allowed_ids, strict=True)):
        if m == 0:
            assert allowed is None
        elif allowed is not None:
            assert rollout.completion_ids[t] in allowed


@pytest.mark.parametrize("env_name", ["chain4", "gated"])
def test_group_rollout_invariants(tiny, env_name):
    """An untrained model's rollouts are aligned, and every call is a valid call of the schema."""
    model, tok = tiny
    factory = env_factory(env_name)
    trie = CallTrie.build(factory().schema(), tok)
    rollouts = collect_group(model, tok, factory, make_tasks(1, seed=2)[0], 4, GenConfig(), seed=1)
    assert len(rollouts) == 4 and len({tuple(r.prompt_ids) for r in rollouts}) == 1
    for r in rollouts:
        check_invariants(r, tok, trie)
        assert all(e.status in (OK, ERROR) for e in r.episode.calls)
        assert r.outcome in (0.0, 1.0) and r.episode.outcome == r.outcome
        last = r.episode.calls[-1]
        assert r.outcome == 1.0 or len(r.call_spans) == factory().max_turns
        assert r.outcome == 0.0 or (last.tool == "submit" and last.status == OK)
        assert r.episode.events[0].kind == "user" and r.info["call_event_indices"][0] == 1


def test_mask_zero_tokens_are_exactly_the_separately_tokenised_outputs(tiny):
    """Between generated turns sit exactly encode(close + tool message + next prompt), with mask 0."""
    model, tok = tiny
    chat = ChatFormat.from_tokenizer(tok)
    (r,) = collect_group(model, tok, env_factory("chain4", max_turns=5), make_tasks(1)[0], 1, GenConfig(), seed=3)
    segments, current = [], [r.completion_mask[0], []]
    for tid, m in zip(r.completion_ids, r.completion_mask, strict=True):
        if m != current[0]:
            segments.append(current)
            current = [m, []]
        current[1].append(tid)
    segments.append(current)
    outputs = [ids for m, ids in segments if m == 0]
    calls = r.episode.calls
    assert len(outputs) == len(calls)
    for k, (ids, event) in enumerate(zip(outputs, calls, strict=True)):
        text = event.result if event.status == OK else event.error_text
        assert ids == chat.after_turn_ids(tok, text, True, next_turn=k + 1 < len(calls))


def test_contexts_are_the_training_sequence(tiny):
    """Each turn is generated from exactly prompt_ids + the completion so far (no re-rendering)."""
    model, tok = tiny
    seen = []

    class Recorder(HFGenerator):
        def sample_turns(self, contexts, trie, cfg):
            seen.append([list(c) for c in contexts])
            return super().sample_turns(contexts, trie, cfg)

    rollouts = collect_group(
        Recorder(model, tok), tok, env_factory("chain4", max_turns=4), make_tasks(1)[0], 3, GenConfig(), seed=0
    )
    for g, r in enumerate(rollouts):
        for turn, (start, _end) in enumerate(r.call_spans):
            turn_start = start  # no reasoning: the turn starts with the call
            assert seen[turn][g] == r.prompt_ids + r.completion_ids[:turn_start]


def test_trainer_logprobs_equal_the_samplers(tiny):
    """The trainer's log-probs of a rollout equal the sampler's: over the recorded allowed ids (masked)
    and over the full vocabulary (policy_logprobs); the EOS forced at a leaf of the trie gets 0."""
    model, tok = tiny
    turns = []

    class Recorder(HFGenerator):
        def sample_turns(self, contexts, trie, cfg):
            turns.append(super().sample_turns(contexts, trie, cfg))
            return turns[-1]

    rollouts = collect_group(
        Recorder(model, tok),
        tok,
        env_factory("chain4", max_turns=4),
        make_tasks(1)[0],
        3,
        GenConfig(temperature=0.7),
        seed=5,
    )
    for g, r in enumerate(rollouts):
        # turn k was sampled in row `active.index(g)` of the k-th call, active = the rollouts still playing
        samples = [
            turns[k][[h for h, q in enumerate(rollouts) if len(q.call_spans) > k].index(g)]
            for k in range(len(r.call_spans))
        ]
        gen = torch.tensor(r.completion_mask, dtype=torch.bool)
        with torch.no_grad():
            masked, _ = completion_logprobs(model, [r], tok.pad_token_id, constrained=True, temperature=0.7)
            full, _ = completion_logprobs(model, [r], tok.pad_token_id, constrained=False, temperature=0.7)
        sampled = torch.tensor([x for s in samples for x in s.logprobs])
        sampled_full = torch.tensor([x for s in samples for x in s.policy_logprobs])
        n = transformer_terms(model, len(r.prompt_ids) + len(r.completion_ids))  # one turn at a time vs all
        assert_close(masked[0][gen], sampled, n=n, what="masked log-probs")
        assert_close(full[0][gen], sampled_full, n=n, what="full-vocabulary log-probs")
        eos = [t for t, tid in enumerate(r.completion_ids) if gen[t] and tid == tok.eos_token_id]
        assert eos and all(masked[0, t] == 0.0 for t in eos)


def test_same_seed_same_rollouts_and_global_rng_untouched(tiny):
    model, tok = tiny
    factory, task = env_factory("chain4"), make_tasks(1)[0]
    torch.manual_seed(123)
    before = torch.get_rng_state()
    a = collect_group(model, tok, factory, task, 4, GenConfig(), seed=9)
    assert torch.equal(before, torch.get_rng_state())
    b = collect_group(model, tok, factory, task, 4, GenConfig(), seed=9)
    c = collect_group(model, tok, factory, task, 4, GenConfig(), seed=10)
    assert [r.completion_ids for r in a] == [r.completion_ids for r in b]
    assert [r.completion_ids for r in a] != [r.completion_ids for r in c]


def test_random_model_emits_only_wellformed_calls_in_both_styles(tiny):
    """Sampled at a high temperature, every turn is one valid call (plain and JSON), ended by EOS."""
    model, tok = tiny
    env = make_env("gated")
    for style in ("plain", "json"):
        trie = CallTrie.build(env.schema(), tok, CallFormat(style))
        cfg = GenConfig(temperature=3.0, call_style=style)
        torch.manual_seed(0)
        contexts = [encode(tok, "<|user|> fetch k0 <|end|> <|assistant|>")] * 16
        for sample in HFGenerator(model, tok).sample_turns(contexts, trie, cfg):
            assert isinstance(sample, TurnSample) and sample.ended_with_eos
            assert sample.call is not None and sample.call_text in trie.texts
            assert sample.ids[sample.call_start : sample.call_end] == trie.ids[trie.texts.index(sample.call_text)]
            assert sample.ids[-1] == tok.eos_token_id and sample.call_end == len(sample.ids) - 1


def test_cut_off_turns_are_malformed_calls(tiny):
    """A max_new_tokens below the call length gives malformed call events, still aligned."""
    model, tok = tiny
    factory = env_factory("chain4", max_turns=3)
    trie = CallTrie.build(factory().schema(), tok)
    rollouts = collect_group(model, tok, factory, make_tasks(1)[0], 2, GenConfig(max_new_tokens=1), seed=0)
    for r in rollouts:
        check_invariants(r, tok, trie)
        assert [e.status for e in r.episode.calls] == [MALFORMED] * 3 and r.outcome == 0.0
        assert all(end - start == 1 for start, end in r.call_spans)


class Oracle:
    """A scripted generator (the `sample_turns` protocol) that always emits the env's expected call."""

    def __init__(self, tok, envs):
        self.tok, self.envs = tok, envs

    def sample_turns(self, contexts, trie, cfg):
        out = []
        for env in self.envs[: len(contexts)]:
            index = trie.calls.index(env.expected_call())
            ids = trie.ids[index] + [trie.eos_id]
            out.append(
                TurnSample(
                    ids,
                    [0.0] * len(ids),
                    [0.0] * len(ids),
                    [None] * len(ids),
                    trie.calls[index],
                    trie.texts[index],
                    0,
                    len(ids) - 1,
                    True,
                )
            )
        return out


def test_scripted_policy_succeeds_and_episode_scores(tiny):
    """A policy object with sample_turns drives the loop; solved episodes have outcome 1 and score under the rules."""
    from rlvp_dsl import load_program

    _, tok = tiny
    made = []

    def factory():
        made.append(make_env("gated"))
        return made[-1]

    (r,) = collect_group(Oracle(tok, made), tok, factory, make_tasks(1)[0], 1, GenConfig(), seed=0)
    assert r.outcome == 1.0 and [e.tool for e in r.episode.calls] == ["fetch", "unlock", "parse", "transform", "submit"]
    assert [e.signals["stages_remaining"] for e in r.episode.calls] == [3.0, 3.0, 2.0, 1.0, 0.0]
    assert r.episode.calls[0].tags == frozenset({"read"})
    credits = load_program("rules/gated.rlvp").score(r.episode)
    by_event = {}
    for c in credits:
        by_event[c.event_index] = by_event.get(c.event_index, 0.0) + c.value
    unlock_event = r.episode.calls[1].index
    assert by_event.get(unlock_event, 0.0) == 0.0  # the hidden precondition earns nothing
    assert all(v > 0 for v in by_event.values())


def test_collect_group_rejects_empty_group(tiny):
    model, tok = tiny
    with pytest.raises(ValueError, match="num_generations"):
        collect_group(model, tok, env_factory("chain4"), make_tasks(1)[0], 0)


def test_trie_rejects_calls_the_tokenizer_cannot_spell(tiny):
    _, tok = tiny
    env = make_env("chain4", num_values=12)  # k10, k11 are not in the tiny vocabulary built for gated
    with pytest.raises(ValueError, match="does not survive tokenisation"):
        CallTrie.build(env.schema(), tok)


def test_gen_config_validation():
    with pytest.raises(ValueError, match="temperature"):
        GenConfig(temperature=-1)
    with pytest.raises(ValueError, match="max_new_tokens"):
        GenConfig(max_new_tokens=0)


def test_rollout_rejects_misaligned_token_lists():
    """A Rollout whose mask or allowed_ids do not match completion_ids names the list."""
    from rlvp_dsl.events import Episode
    from trainer.types import Rollout

    episode = Episode(id="e", events=[], outcome=0.0)
    with pytest.raises(ValueError, match="allowed_ids has 1 entries, completion_ids has 2"):
        Rollout("t", [1], [5, 6], [1, 1], [], episode, 0.0, allowed_ids=[None])
    with pytest.raises(ValueError, match="completion_mask has 1 entries"):
        Rollout("t", [1], [5, 6], [1], [], episode, 0.0)
