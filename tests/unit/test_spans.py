"""Acceptance case 5: multi-turn spans with a tokenizer that merges across turn boundaries and a chat
template that strips reasoning from earlier turns.  Spans and masks must never drift."""

from __future__ import annotations

import random

import pytest
import torch

from trainer.envs import all_calls, env_factory, make_env, make_tasks
from trainer.sampling.call_grammar import CallTrie
from trainer.sampling.generation import GenConfig
from trainer.model import TinyModelConfig, build_tiny_model
from trainer.sampling.rollout import collect_group, system_prompt
from trainer.sampling.call_grammar import CallFormat
from trainer.sampling.tokenizer import THINK_CLOSE, THINK_OPEN, ChatFormat, encode

torch.set_num_threads(1)

# Earlier assistant turns lose everything up to </think>; role markers are plain text (no special
# tokens), so BPE merges run across turn boundaries.
STRIPPING_TEMPLATE = (
    "{% for m in messages %}{% set c = m['content'] %}"
    "{% if m['role'] == 'assistant' and not loop.last and '</think>' in c %}{% set c = c.split('</think>')[-1] %}"
    "{% endif %}<{{ m['role'] }}>{{ c }}</{{ m['role'] }}>\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
FILLER = ("hmm", " so", " the", " next", " stage")


def _corpus(n: int = 300):
    """Rendered scripted episodes: the boundary strings BPE should learn to merge."""
    rng = random.Random(0)
    env = make_env("chain4")
    fmt = CallFormat()
    for task in make_tasks(n, seed=1):
        text = f"<system>{system_prompt(env, fmt)}</system>\n<user>{env.reset(task)}</user>\n"
        while (call := env.expected_call()) is not None:
            if rng.random() < 0.5:  # some wrong calls, for error texts
                spec = rng.choice(list(env.schema()))
                call = rng.choice(all_calls(spec))
            think = "".join(rng.choice(FILLER) for _ in range(rng.randint(0, 3)))
            result = env.step(call)
            text += f"<assistant>{THINK_OPEN}{think}{THINK_CLOSE}{fmt.render(call)}</assistant>\n"
            text += f"<tool>{result.text}</tool>\n"
            if result.done or text.count("<tool>") > 12:
                break
        yield text


@pytest.fixture(scope="module")
def bpe():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=700,
        special_tokens=["<|eot|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(list(_corpus()), trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|eot|>", pad_token="<|pad|>")
    tok.chat_template = STRIPPING_TEMPLATE
    tok.padding_side = "left"
    return tok


@pytest.fixture(scope="module")
def rollouts(bpe):
    model = build_tiny_model(bpe, TinyModelConfig(seed=0))
    think_ids = tuple(sorted({i for word in FILLER for i in encode(bpe, word)}))
    cfg = GenConfig(temperature=1.5, think_max_tokens=3, think_token_ids=think_ids)
    factory = env_factory("chain4", max_turns=6)
    groups = [collect_group(model, bpe, factory, task, 4, cfg, seed=k) for k, task in enumerate(make_tasks(2))]
    return [r for g in groups for r in g], CallTrie.build(factory().schema(), bpe)


def test_the_case_is_hard(bpe, rollouts):
    """The tokenizer merges across turn boundaries and the template rewrites earlier turns."""
    rs, _ = rollouts
    assert any(encode(bpe, bpe.decode(r.prompt_ids + r.completion_ids)) != r.prompt_ids + r.completion_ids for r in rs)
    r = rs[0]
    sequence = bpe.decode(r.prompt_ids + r.completion_ids)
    messages = [{"role": "user", "content": r.episode.events[0].text}]
    for (start, end), event in zip(r.call_spans, r.episode.calls, strict=True):
        turn_start = max(i for i in range(start + 1) if i == 0 or r.completion_mask[i - 1] == 0)
        messages.append({"role": "assistant", "content": bpe.decode(r.completion_ids[turn_start:end])})
        messages.append({"role": "tool", "content": event.result or event.error_text})
    rendered = bpe.apply_chat_template(messages, tokenize=False)
    assert sequence.count(THINK_OPEN) == len(r.call_spans) > rendered.count(THINK_OPEN)


def test_spans_decode_to_their_call_and_appear_once(bpe, rollouts):
    """Each call span decodes to exactly its call, and its ids occur among generated tokens only there."""
    rs, trie = rollouts
    for r in rs:
        ids, mask = r.completion_ids, r.completion_mask
        for (start, end), text in zip(r.call_spans, r.info["call_texts"], strict=True):
            assert bpe.decode(ids[start:end]) == text and text in trie.texts
            assert ids[start:end] == trie.ids[trie.texts.index(text)]
            span_ids, width = ids[start:end], end - start
            hits = {
                i for i in range(len(ids) - width + 1) if ids[i : i + width] == span_ids and all(mask[i : i + width])
            }
            same_text = {s for (s, _), t in zip(r.call_spans, r.info["call_texts"], strict=True) if t == text}
            assert hits == same_text


def test_masks_and_spans_never_drift(bpe, rollouts):
    """Lengths agree; each generated segment is <think>..</think> + call + EOS; the rest is the separately
    tokenised close + tool output (mask 0) and nothing else."""
    rs, _ = rollouts
    chat = ChatFormat.from_tokenizer(bpe)
    for r in rs:
        n = len(r.completion_ids)
        assert len(r.completion_mask) == n == len(r.allowed_ids)
        position = 0
        calls = r.episode.calls
        for k, ((start, end), event) in enumerate(zip(r.call_spans, calls, strict=True)):
            turn = r.completion_ids[position : end + 1]
            assert all(r.completion_mask[position : end + 1])
            assert bpe.decode(turn[: start - position]).startswith(THINK_OPEN)
            assert bpe.decode(turn[: start - position]).endswith(THINK_CLOSE)
            assert r.completion_ids[end] == bpe.eos_token_id
            observation = event.result or event.error_text
            after = chat.after_turn_ids(bpe, observation, True, next_turn=k + 1 < len(calls))
            assert r.completion_ids[end + 1 : end + 1 + len(after)] == after
            assert not any(r.completion_mask[end + 1 : end + 1 + len(after)])
            assert observation in bpe.decode(after)
            position = end + 1 + len(after)
        assert position == n


def test_reasoning_is_bounded_and_in_the_sequence(bpe, rollouts):
    """Reasoning tokens come from the allowed filler set, at most think_max_tokens per turn."""
    rs, _ = rollouts
    close = encode(bpe, THINK_CLOSE)
    opening = encode(bpe, THINK_OPEN)
    filler = {i for word in FILLER for i in encode(bpe, word)}
    for r in rs:
        position = 0
        for start, end in r.call_spans:
            free = r.completion_ids[position + len(opening) : start - len(close)]
            assert len(free) <= 3 and set(free) <= filler
            assert r.completion_ids[start - len(close) : start] == close
            position = next(
                i
                for i in range(end + 1, len(r.completion_ids) + 1)
                if i == len(r.completion_ids) or r.completion_mask[i] == 1
            )


def test_turn_cut_inside_reasoning_is_one_malformed_call(bpe):
    """A turn that runs out of tokens inside the reasoning is a malformed call spanning the whole turn."""
    model = build_tiny_model(bpe, TinyModelConfig(seed=1))
    think_ids = tuple(sorted({i for word in FILLER for i in encode(bpe, word)}))
    cfg = GenConfig(think_max_tokens=3, think_token_ids=think_ids, max_new_tokens=2)
    (r,) = collect_group(model, bpe, env_factory("chain4", max_turns=2), make_tasks(1)[0], 1, cfg, seed=0)
    assert [e.status for e in r.episode.calls] == ["malformed", "malformed"]
    for (start, end), text in zip(r.call_spans, r.info["call_texts"], strict=True):
        assert end - start == 2 and bpe.decode(r.completion_ids[start:end]) == text
        assert text.startswith(THINK_OPEN)
