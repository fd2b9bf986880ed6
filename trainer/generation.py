"""Constrained generation of tool calls through HF `generate`.

A turn of the policy is sampled under a mask of valid calls:

1. `CallTrie.build(schema, tokenizer)` enumerates every valid call string (tool
   names x argument values from the environment schema, rendered by `CallFormat`),
   tokenises each one on its own and stores the id sequences in a trie.
2. `CallConstraint`, a HF `LogitsProcessor`, keeps one small state machine per
   batch row: an optional free "reasoning" segment (``<think> ... </think>``, at most
   `GenConfig.think_max_tokens` tokens), then the call, walked down the trie (only
   the children of the current node are allowed), then the EOS token, forced at a
   leaf.  Every other logit is set to -inf, so even a randomly initialised model
   emits only well-formed calls.
3. `HFGenerator.sample_turns` left-pads a batch of contexts, runs `model.generate`
   on the model's device with sampling at `GenConfig.temperature`, and returns per
   row the generated ids (up to and including EOS), the parsed call, where the
   call's tokens are, and two log-probabilities per token:

   * ``logprobs``: log softmax(masked logits / temperature) of the sampled token --
     the distribution it was actually drawn from (forced tokens get 0).  The trainer
     recomputes it from its own logits and the ``allowed`` id sets, which the
     rollout keeps (`Rollout.allowed_ids`, `trainer.logprobs.completion_logprobs`).
   * ``policy_logprobs``: the same without the mask (the unconstrained policy, what
     a plain full-softmax forward pass recomputes).

Greedy decoding is used when the temperature is 0 (log-probs then use T = 1).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import attrs

from rlvp_dsl.tools import ToolSpec
from trainer.envs.base import ToolCall, all_calls
from trainer.tokenizer import THINK_CLOSE, THINK_OPEN, encode


@attrs.frozen
class CallFormat:
    """How a call is written: ``plain`` = ``fetch k3`` (tool, then argument values, by spaces);
    ``json`` = ``{"name": "fetch", "arguments": {"token": "k3"}}``."""

    style: str = attrs.field(default="plain", validator=attrs.validators.in_(("plain", "json")))

    def render(self, call: ToolCall) -> str:
        if self.style == "json":
            return json.dumps({"name": call.tool, "arguments": dict(call.arguments)})
        return " ".join([call.tool, *[str(v) for v in call.arguments.values()]])

    def describe(self) -> str:
        """One sentence for the system prompt."""
        if self.style == "json":
            return 'Write each call as JSON : {"name": tool, "arguments": {"token": value}} .'
        return "Write each call as the tool name and then its token , for example fetch k0 ."


@attrs.frozen
class GenConfig:
    """Sampling settings of one policy turn.

    Attributes:
        temperature: softmax temperature of sampling (0 = greedy).
        max_new_tokens: cap on generated tokens per turn; None = exactly enough for
            the longest call plus the reasoning segment.  A turn cut by the cap is a
            ``malformed`` call.
        think_max_tokens: length of the optional free reasoning segment before the
            call (0 = calls only).
        think_token_ids: ids the reasoning may use (None = every non-special token).
        call_style: `CallFormat` style (``plain`` or ``json``).
        max_turns: calls per episode; None = the environment's ``max_turns``.
        system_prompt: start the episode with a system message listing the tools.
    """

    temperature: float = 1.0
    max_new_tokens: int | None = None
    think_max_tokens: int = 0
    think_token_ids: tuple[int, ...] | None = None
    call_style: str = "plain"
    max_turns: int | None = None
    system_prompt: bool = True

    def __attrs_post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"'temperature' must be >= 0 (got {self.temperature})")
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise ValueError(f"'max_new_tokens' must be >= 1 (got {self.max_new_tokens})")
        if self.think_max_tokens < 0:
            raise ValueError(f"'think_max_tokens' must be >= 0 (got {self.think_max_tokens})")
        if self.max_turns is not None and self.max_turns < 1:
            raise ValueError(f"'max_turns' must be >= 1 (got {self.max_turns})")


class _Node:
    __slots__ = ("children", "call")

    def __init__(self) -> None:
        self.children: dict[int, _Node] = {}
        self.call: int | None = None


class CallTrie:
    """Token trie of every valid call string of a schema.

    Attributes:
        calls: the valid calls; `texts[i]` is `calls[i]` rendered; `ids[i]` its tokens.
        eos_id: the token that ends a call.
    """

    def __init__(self, calls: list[ToolCall], texts: list[str], ids: list[list[int]], eos_id: int) -> None:
        self.calls, self.texts, self.ids, self.eos_id = calls, texts, ids, eos_id
        self.root = _Node()
        for index, seq in enumerate(ids):
            node = self.root
            for tok in seq:
                node = node.children.setdefault(tok, _Node())
            if node.call is not None:
                raise ValueError(
                    f"calls {texts[node.call]!r} and {texts[index]!r} tokenise to the same ids; "
                    "they cannot be told apart"
                )
            node.call = index
        self.max_len = max((len(s) for s in ids), default=0)

    @classmethod
    def build(cls, schema: Sequence[ToolSpec], tokenizer, call_format: CallFormat | None = None) -> "CallTrie":
        """Enumerate, render and tokenise every call of `schema`.

        Raises ValueError when the schema has no calls, a call's ids do not decode
        back to its text (its span could not be checked), or contain the EOS token.
        """
        fmt = call_format or CallFormat()
        calls = [call for spec in schema for call in all_calls(spec)]
        if not calls:
            raise ValueError("environment schema offers no calls (no tools, or a parameter with no values)")
        texts = [fmt.render(c) for c in calls]
        ids = [encode(tokenizer, t) for t in texts]
        eos = int(tokenizer.eos_token_id)
        for text, seq in zip(texts, ids, strict=True):
            if not seq or eos in seq:
                raise ValueError(f"call {text!r} tokenises to {seq}: empty or containing the EOS token")
            back = tokenizer.decode(seq)
            if back != text:
                raise ValueError(
                    f"call {text!r} does not survive tokenisation (decodes to {back!r}); "
                    "add its words to the tokenizer vocabulary"
                )
        return cls(calls, texts, ids, eos)

    def parse(self, ids: Sequence[int]) -> int | None:
        """Index of the call whose ids are exactly `ids`, or None."""
        node = self.root
        for tok in ids:
            node = node.children.get(tok)
            if node is None:
                return None
        return node.call


# Phases of one row's state machine.
_OPEN, _THINK, _CLOSE, _CALL, _DONE = range(5)


class _RowState:
    __slots__ = ("phase", "pos", "think", "node", "call", "call_start", "n")

    def __init__(self, has_think: bool, root: _Node) -> None:
        self.phase = _OPEN if has_think else _CALL
        self.pos = 0  # position inside a forced sequence
        self.think = 0  # free reasoning tokens so far
        self.node = root
        self.call: int | None = None
        self.call_start = 0  # generated-token offset where the call starts
        self.n = 0  # tokens consumed


class CallConstraint:
    """`LogitsProcessor` masking every token that cannot continue a valid turn.

    Construct one per `generate` call: `rows` batch rows, contexts of padded length
    `input_len`.  After generation, `states[r]` tells where row r's call begins and
    which call it is; `allowed[r][t]` is the tuple of ids allowed at generated step t
    (None: the free reasoning vocabulary).
    """

    def __init__(self, trie: CallTrie, rows: int, input_len: int, think_max: int = 0,
                 think_open: Sequence[int] = (), think_close: Sequence[int] = (),
                 think_ids: Sequence[int] | None = None, vocab_size: int | None = None) -> None:
        import torch

        self.trie, self.input_len, self.think_max = trie, input_len, think_max
        self.think_open, self.think_close = list(think_open), list(think_close)
        self.states = [_RowState(think_max > 0, trie.root) for _ in range(rows)]
        self.allowed: list[list[tuple[int, ...] | None]] = [[] for _ in range(rows)]
        self._think_mask = None
        if think_max > 0:
            mask = torch.zeros(vocab_size, dtype=torch.bool)
            mask[list(think_ids)] = True
            if self.think_close:
                mask[self.think_close[0]] = False
            self._think_mask = mask

    def _advance(self, s: _RowState, tok: int) -> None:
        s.n += 1
        if s.phase == _OPEN:
            s.pos += 1
            if s.pos == len(self.think_open):
                s.phase, s.pos = _THINK, 0
        elif s.phase == _THINK:
            if self.think_close and tok == self.think_close[0]:
                s.phase, s.pos = _CLOSE, 1
            else:
                s.think += 1
            if s.phase == _CLOSE and s.pos == len(self.think_close):
                s.phase, s.call_start = _CALL, s.n
        elif s.phase == _CLOSE:
            s.pos += 1
            if s.pos == len(self.think_close):
                s.phase, s.call_start = _CALL, s.n
        elif s.phase == _CALL:
            if tok == self.trie.eos_id and s.node.call is not None:
                s.call, s.phase = s.node.call, _DONE
            else:
                s.node = s.node.children[tok]

    def _allowed(self, s: _RowState) -> tuple[int, ...] | None:
        if s.phase == _OPEN:
            return (self.think_open[s.pos],)
        if s.phase == _THINK:
            if s.think >= self.think_max:
                return (self.think_close[0],)
            return None
        if s.phase == _CLOSE:
            return (self.think_close[s.pos],)
        if s.phase == _CALL:
            ids = tuple(s.node.children)
            return ids + (self.trie.eos_id,) if s.node.call is not None else ids
        return (self.trie.eos_id,)

    def __call__(self, input_ids, scores):
        import torch

        step = input_ids.shape[1] - self.input_len
        last = input_ids[:, -1].tolist() if step > 0 else []  # one copy to the host per step
        mask = torch.zeros(scores.shape, dtype=torch.bool)  # built on the CPU, moved once
        for row, s in enumerate(self.states):
            if step > 0 and s.phase != _DONE:
                self._advance(s, last[row])
            allowed = self._allowed(s)
            if s.phase != _DONE:
                self.allowed[row].append(allowed)
            if allowed is None:
                mask[row, : self._think_mask.numel()] = self._think_mask
                if self.think_close:
                    mask[row, self.think_close[0]] = True
            else:
                mask[row, list(allowed)] = True
        return scores.masked_fill(~mask.to(scores.device), float("-inf"))


@attrs.frozen
class TurnSample:
    """One row's generated turn.

    Attributes:
        ids: generated token ids, up to and including EOS (`[n]`).
        logprobs: log-probs of `ids` under the call mask, i.e. as sampled (`[n]`, nats).
        policy_logprobs: the same without the mask (`[n]`, nats).
        allowed: per token, the allowed ids (None: free reasoning vocabulary).
        call: the parsed call, or None when the turn was cut off (malformed).
        call_text: the call's text (the decoded call tokens when malformed).
        call_start, call_end: the call's tokens are `ids[call_start:call_end]` (EOS excluded).
        ended_with_eos: whether `ids` ends with the EOS token.
    """

    ids: list[int]
    logprobs: list[float]
    policy_logprobs: list[float]
    allowed: list[tuple[int, ...] | None]
    call: ToolCall | None
    call_text: str
    call_start: int
    call_end: int
    ended_with_eos: bool


class HFGenerator:
    """Samples constrained turns with a HF causal LM (`PreTrainedModel` or a peft model)."""

    def __init__(self, model, tokenizer) -> None:
        self.model, self.tokenizer = model, tokenizer

    def sample_turns(self, contexts: Sequence[Sequence[int]], trie: CallTrie, cfg: GenConfig) -> list[TurnSample]:
        """Generate one turn for each context (a batch, left-padded).  Uses the global torch RNG."""
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        from trainer.batch import device_of

        tok = self.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else trie.eos_id
        width = max(len(c) for c in contexts)
        input_ids = torch.full((len(contexts), width), pad, dtype=torch.long)
        attention = torch.zeros((len(contexts), width), dtype=torch.long)
        for row, ctx in enumerate(contexts):
            input_ids[row, width - len(ctx):] = torch.tensor(list(ctx), dtype=torch.long)
            attention[row, width - len(ctx):] = 1
        think_open = encode(tok, THINK_OPEN) if cfg.think_max_tokens else []
        think_close = encode(tok, THINK_CLOSE) if cfg.think_max_tokens else []
        vocab = self.model.get_output_embeddings().weight.shape[0]
        think_ids = cfg.think_token_ids
        if cfg.think_max_tokens and think_ids is None:
            special = set(tok.all_special_ids)
            think_ids = [i for i in range(min(vocab, len(tok))) if i not in special]
        constraint = CallConstraint(trie, len(contexts), width, cfg.think_max_tokens, think_open, think_close,
                                    think_ids, vocab)
        budget = cfg.max_new_tokens or (len(think_open) + cfg.think_max_tokens + len(think_close) + trie.max_len + 1)
        greedy = cfg.temperature == 0
        gen_cfg = GenerationConfig(
            do_sample=not greedy, temperature=None if greedy else cfg.temperature, top_k=None, top_p=None,
            max_new_tokens=budget, pad_token_id=pad, eos_token_id=trie.eos_id, bos_token_id=None,
            return_dict_in_generate=True, output_logits=True, output_scores=True,
        )
        dev = device_of(self.model)
        with torch.no_grad():
            out = self.model.generate(input_ids=input_ids.to(dev), attention_mask=attention.to(dev),
                                      generation_config=gen_cfg, logits_processor=LogitsProcessorList([constraint]))
        temp = 1.0 if greedy else cfg.temperature
        new = out.sequences[:, width:]
        raw = torch.stack(out.logits, dim=1).float()  # (B, steps, V)
        scores = torch.stack(out.scores, dim=1).float()  # (B, steps, V) after the mask
        lp_raw = torch.log_softmax(raw / temp, dim=-1).gather(-1, new[..., None])[..., 0]
        lp_mask = torch.log_softmax(scores, dim=-1).gather(-1, new[..., None])[..., 0]
        new, lp_raw, lp_mask = new.cpu(), lp_raw.cpu(), lp_mask.cpu()  # (B, steps): read row by row below
        samples = []
        for row, state in enumerate(constraint.states):
            ids = new[row].tolist()
            n = ids.index(trie.eos_id) + 1 if trie.eos_id in ids else len(ids)
            ids = ids[:n]
            # The final EOS is sampled after the processor's last call: parse the call here.
            index = trie.parse(ids[state.call_start:n - 1]) if ids and ids[-1] == trie.eos_id else None
            ended = state.phase in (_CALL, _DONE) and index is not None
            # A turn cut off before its call began is a malformed call spanning the whole turn.
            call_start = state.call_start if state.phase in (_CALL, _DONE) else 0
            if ended:
                call_end, call, text = n - 1, trie.calls[index], trie.texts[index]
            else:
                call_end, call, text = n, None, tok.decode(ids[call_start:n])
            samples.append(TurnSample(
                ids=ids, logprobs=lp_mask[row, :n].tolist(), policy_logprobs=lp_raw[row, :n].tolist(),
                allowed=constraint.allowed[row][:n], call=call, call_text=text,
                call_start=call_start, call_end=call_end, ended_with_eos=ended,
            ))
        return samples


def as_generator(policy, tokenizer) -> Any:
    """`policy` itself when it has `sample_turns` (e.g. the vLLM backend), else an `HFGenerator`."""
    return policy if hasattr(policy, "sample_turns") else HFGenerator(policy, tokenizer)
