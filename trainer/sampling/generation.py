"""Constrained generation of tool calls with a HF causal LM.

A turn of the policy is sampled under a mask of valid calls (steps 1 and 2 are
`trainer.sampling.call_grammar`):

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

4. `CachedSampler` is the rollout's main path: every episode of an iteration in one
   batch, each keeping its KV cache across turns, sampled exactly as `HFGenerator`
   would sample each group (see its docstring and docs/trainer.md).

Greedy decoding is used when the temperature is 0 (log-probs then use T = 1).
Sampling is from the plain masked softmax: no top-k or top-p (``top_k=0, top_p=1``;
transformers would otherwise fill them in from the model's generation config).
"""

from __future__ import annotations

from typing import Any, Sequence

import attrs

from trainer.sampling.call_grammar import CallConstraint, CallTrie, RowState
from trainer.envs.base import ToolCall
from trainer.sampling.tokenizer import THINK_CLOSE, THINK_OPEN, encode


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


def _turn_setup(model, tok, trie: CallTrie, rows: int, input_len: int, cfg: GenConfig):
    """The call mask for `rows` rows and the turn's token budget (shared by both samplers)."""
    think_open = encode(tok, THINK_OPEN) if cfg.think_max_tokens else []
    think_close = encode(tok, THINK_CLOSE) if cfg.think_max_tokens else []
    vocab = model.get_output_embeddings().weight.shape[0]
    think_ids = cfg.think_token_ids
    if cfg.think_max_tokens and think_ids is None:
        special = set(tok.all_special_ids)
        think_ids = [i for i in range(min(vocab, len(tok))) if i not in special]
    constraint = CallConstraint(trie, rows, input_len, cfg.think_max_tokens, think_open, think_close, think_ids, vocab)
    budget = cfg.max_new_tokens or (len(think_open) + cfg.think_max_tokens + len(think_close) + trie.max_len + 1)
    return constraint, budget


def _turn_sample(
    ids: list[int], lp_mask: list[float], lp_raw: list[float], state: RowState, allowed: list, trie: CallTrie, tok
) -> TurnSample:
    """One row's `TurnSample` from its generated ids (up to and including EOS) and its mask state."""
    n = len(ids)
    # The final EOS is sampled after the processor's last call: parse the call here.
    index = trie.parse(ids[state.call_start : n - 1]) if ids and ids[-1] == trie.eos_id else None
    ended = state.in_call and index is not None
    # A turn cut off before its call began is a malformed call spanning the whole turn.
    call_start = state.call_start if state.in_call else 0
    if ended:
        call_end, call, text = n - 1, trie.calls[index], trie.texts[index]
    else:
        call_end, call, text = n, None, tok.decode(ids[call_start:n])
    return TurnSample(
        ids=ids,
        logprobs=lp_mask,
        policy_logprobs=lp_raw,
        allowed=allowed[:n],
        call=call,
        call_text=text,
        call_start=call_start,
        call_end=call_end,
        ended_with_eos=ended,
    )


class HFGenerator:
    """Samples constrained turns with a HF causal LM (`PreTrainedModel` or a peft model).

    Every call re-feeds each whole context to `generate` (no KV cache across turns);
    `CachedSampler` is the batched path that keeps it (the compact trainer's and the TRL
    rollout's).  This one is the `sample_turns` reference the cached path is tested against.
    """

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
            input_ids[row, width - len(ctx) :] = torch.tensor(list(ctx), dtype=torch.long)
            attention[row, width - len(ctx) :] = 1
        constraint, budget = _turn_setup(self.model, tok, trie, len(contexts), width, cfg)
        greedy = cfg.temperature == 0
        gen_cfg = GenerationConfig(
            do_sample=not greedy,
            temperature=None if greedy else cfg.temperature,
            top_k=None if greedy else 0,
            top_p=None if greedy else 1.0,
            max_new_tokens=budget,
            pad_token_id=pad,
            eos_token_id=trie.eos_id,
            bos_token_id=None,
            return_dict_in_generate=True,
            output_logits=True,
            output_scores=True,
        )
        dev = device_of(self.model)
        with torch.no_grad():
            out = self.model.generate(
                input_ids=input_ids.to(dev),
                attention_mask=attention.to(dev),
                generation_config=gen_cfg,
                logits_processor=LogitsProcessorList([constraint]),
            )
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
            samples.append(
                _turn_sample(
                    ids[:n],
                    lp_mask[row, :n].tolist(),
                    lp_raw[row, :n].tolist(),
                    state,
                    constraint.allowed[row],
                    trie,
                    tok,
                )
            )
        return samples


def _growing_cache():
    """A transformers `DynamicCache` whose layers append into a preallocated buffer that doubles
    when full, instead of concatenating the whole cache at every step (quadratic copying)."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    class GrowingLayer(DynamicLayer):
        def update(self, key_states, value_states, *args, **kwargs):
            import torch

            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
                self._k = self._v = None
                self._n = 0
            n, new = self._n, key_states.shape[-2]
            if self._k is None or n + new > self._k.shape[-2]:
                cap = max(64, 2 * (n + new))
                shape = (*key_states.shape[:-2], cap, key_states.shape[-1])
                k = torch.empty(shape, dtype=key_states.dtype, device=key_states.device)
                v = torch.empty(
                    shape[:-1] + (value_states.shape[-1],), dtype=value_states.dtype, device=value_states.device
                )
                if n:
                    k[..., :n, :], v[..., :n, :] = self._k[..., :n, :], self._v[..., :n, :]
                self._k, self._v = k, v
            self._k[..., n : n + new, :] = key_states
            self._v[..., n : n + new, :] = value_states
            self._n = n + new
            self.keys, self.values = self._k[..., : self._n, :], self._v[..., : self._n, :]
            return self.keys, self.values

        def batch_select_indices(self, indices) -> None:
            if self.get_seq_length() > 0:
                self._k, self._v = self._k[indices], self._v[indices]
                self.keys, self.values = self._k[..., : self._n, :], self._v[..., : self._n, :]

        def crop(self, tokens_to_remove: int) -> None:  # pragma: no cover - never called by the sampler
            raise NotImplementedError("the sampler's cache is never cropped")

    cache = DynamicCache()
    cache.layer_class_to_replicate = GrowingLayer
    return cache


class CachedSampler:
    """Multi-turn constrained sampling of many rollouts in one batch, each keeping its KV cache.

    One instance serves the rollouts of an iteration (all groups together, `rows` of
    them).  Each turn, `sample_turn(new_tokens, ...)` appends every row's new tokens (the
    prompt at the first turn, then the close, the tool message and the next generation
    prompt) to that row's cache and decodes the turn one token per step for all rows at
    once, under `CallConstraint`; nothing that is already in the cache is fed again.

    Layout: one `transformers` cache of ``[rows, heads, S, head_dim]`` per layer and a
    ``[rows, S]`` attention mask.  Rows with fewer new tokens than the widest row are
    left-padded inside the chunk, and rows that stopped generating feed a padding token,
    both with attention 0, so a row's cache may hold masked holes; position ids count
    only the real tokens (``cumsum(mask) - 1``), so every row sees exactly the positions
    and keys of its own sequence (`tests/unit/test_cached_sampling.py` checks the logits
    against an unpadded full forward pass).  `keep(rows)` drops finished rollouts.

    Sampling is row-for-row what `HFGenerator` does for the same groups: per step the
    masked logits are divided by the temperature, the softmax of each group's rows is
    drawn from with that group's own `torch.Generator` (`torch.multinomial`, one call per
    group and step over the group's rows still in the turn, as one `generate` call per
    group would), and a group stops drawing when all its rows have ended their turn.  So
    the same seeds give the same sampled ids whenever the logits agree to the last bit
    with the re-fed ones (float rounding may differ; see docs/trainer.md).

    A step at which every drawing row has a single allowed id (a forced token: the EOS at a
    leaf of the call trie, the rest of a tool name) runs no forward pass: the forced ids are
    drawn from one-hot probabilities (the same random numbers are consumed) and fed with the
    next forward.  Their ``policy_logprobs`` are then NaN (the logits were never computed);
    their ``logprobs`` are 0, as always for a forced token.
    """

    def __init__(self, model, tokenizer, rows: int) -> None:
        import inspect

        import torch

        from trainer.batch import device_of

        self.model, self.tokenizer = model, tokenizer
        self.dev = device_of(model)
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.rows = list(range(rows))  # external row ids, in cache order
        self.cache = None
        self.attn = torch.zeros((rows, 0), dtype=torch.long, device=self.dev)
        self.length = torch.zeros(rows, dtype=torch.long, device=self.dev)  # real tokens per row
        self.unfed: dict[int, list[int]] = {r: [] for r in self.rows}  # sampled but not yet in the cache
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        params = inspect.signature(base.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"

    def keep(self, rows: Sequence[int]) -> None:
        """Keep only the external rows `rows` (in that order) in the cache."""
        import torch

        if list(rows) == self.rows:
            return
        where = {r: i for i, r in enumerate(self.rows)}
        idx = torch.tensor([where[r] for r in rows], dtype=torch.long, device=self.dev)
        if self.cache is not None:
            self.cache.batch_select_indices(idx)
        self.attn, self.length = self.attn[idx], self.length[idx]
        self.rows = list(rows)

    def _forward(self, chunks: Sequence[Sequence[int]]):
        """Append one left-padded chunk per row (an empty chunk: one masked pad); returns the logits
        after each row's chunk, ``[rows, V]`` float32 (garbage for a row whose chunk was empty)."""
        import torch

        from trainer.batch import attention_mask_for

        width = max(1, max(len(c) for c in chunks))
        # left-padded rows, built as lists and turned into tensors once
        ids = torch.tensor([[self.pad] * (width - len(c)) + list(c) for c in chunks], dtype=torch.long)
        new = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in chunks], dtype=torch.long)
        ids, new = ids.to(self.dev), new.to(self.dev)
        positions = (self.length[:, None] + new.cumsum(1) - 1).clamp(min=0)
        self.attn = torch.cat([self.attn, new], dim=1)
        self.length = self.length + new.sum(1)
        if self.cache is None:
            self.cache = _growing_cache()
        with torch.no_grad():  # sampling never back-propagates (the loss recomputes log-probs); without it
            # a caller outside the training loop's no_grad (an evaluation) keeps every turn's graph
            out = self.model(
                input_ids=ids,
                attention_mask=attention_mask_for(self.model, self.attn, width),
                position_ids=positions,
                use_cache=True,
                logits_to_keep=1,
                **{self._cache_kw: self.cache},
            )
        cache = getattr(out, "cache", None)
        self.cache = cache if cache is not None else out.past_key_values
        return out.logits[:, -1].to(dtype=torch.float32, copy=True)

    def _prefill(self, chunks: list[list[int]]):
        """`_forward` for the first chunk, computing each distinct chunk once (a group shares its prompt)."""
        import torch

        if self.cache is not None and self.cache.get_seq_length() > 0 or len({tuple(c) for c in chunks}) == len(chunks):
            return self._forward(chunks)
        distinct: dict[tuple[int, ...], int] = {}
        for c in chunks:
            distinct.setdefault(tuple(c), len(distinct))
        idx = torch.tensor([distinct[tuple(c)] for c in chunks], dtype=torch.long, device=self.dev)
        self.attn, self.length = self.attn[: len(distinct)], self.length[: len(distinct)]
        logits = self._forward([list(c) for c in distinct])
        self.cache.batch_select_indices(idx)
        self.attn, self.length = self.attn[idx], self.length[idx]
        return logits[idx]

    def sample_turn(
        self,
        new_tokens: Sequence[Sequence[int]],
        trie: CallTrie,
        cfg: GenConfig,
        groups: Sequence[tuple[Sequence[int], Any]],
    ) -> list[TurnSample]:
        """Feed `new_tokens` (one list per kept row) and sample one turn for every row.

        Args:
            new_tokens: per row (in `keep` order), the tokens that follow its last turn.
            groups: ``(row positions, torch.Generator or None)`` per group: the rows whose
                draws share one generator (the generator is unused when greedy).
        Returns one `TurnSample` per row, in `keep` order.
        """
        import torch

        tok = self.tokenizer
        n = len(self.rows)
        chunks = [self.unfed[r] + list(t) for r, t in zip(self.rows, new_tokens, strict=True)]
        logits = self._prefill(chunks)
        for r in self.rows:
            self.unfed[r] = []
        constraint, budget = _turn_setup(self.model, tok, trie, n, 0, cfg)
        greedy = cfg.temperature == 0
        temp = 1.0 if greedy else cfg.temperature
        V = logits.shape[-1]
        tokens: list[list[int]] = [[] for _ in range(n)]
        lp_mask: list[list[float]] = [[] for _ in range(n)]
        lp_raw: list[list[float]] = [[] for _ in range(n)]
        pending: list[list[int]] = [[] for _ in range(n)]  # drawn, not yet in the cache
        unfinished = [True] * n
        live = [True] * len(groups)  # the group is still drawing (its `generate` would still run)
        mask = constraint.step_mask(None, V).to(self.dev)
        rows_of = [torch.tensor(list(rows), dtype=torch.long, device=self.dev) for rows, _ in groups]
        for step in range(budget):
            if logits is None:  # every drawing row is forced: its one allowed id needs no logits
                scores = torch.zeros((n, V), device=self.dev).masked_fill(~mask, float("-inf"))
            else:
                scores = logits.masked_fill(~mask, float("-inf"))
                if not greedy:
                    scores = scores / cfg.temperature
            picked = torch.full((n,), self.pad, dtype=torch.long, device=self.dev)
            drawn = [False] * n
            for g, (rows, gen) in enumerate(groups):
                if not live[g]:
                    continue
                rows_t = rows_of[g]
                if greedy:
                    picked[rows_t] = torch.argmax(scores[rows_t], dim=-1)
                else:  # a one-hot row draws the same id and consumes the same random numbers
                    probs = torch.softmax(scores[rows_t], dim=-1)
                    picked[rows_t] = torch.multinomial(probs, num_samples=1, generator=gen).squeeze(1)
                for r in rows:
                    drawn[r] = unfinished[r]
            lm = torch.log_softmax(scores, dim=-1).gather(-1, picked[:, None])[:, 0].cpu().tolist()
            if logits is None:
                lr = [float("nan")] * n
            else:
                lr = torch.log_softmax(logits / temp, dim=-1).gather(-1, picked[:, None])[:, 0].cpu().tolist()
            picked_host = picked.cpu().tolist()
            last = [self.pad] * n
            for r in range(n):
                if drawn[r]:
                    tokens[r].append(picked_host[r])
                    pending[r].append(picked_host[r])
                    lp_mask[r].append(lm[r])
                    lp_raw[r].append(lr[r])
                    last[r] = picked_host[r]
                    unfinished[r] = picked_host[r] != trie.eos_id
            for g, (rows, _) in enumerate(groups):
                live[g] = live[g] and step + 1 < budget and any(unfinished[r] for r in rows)
            if not any(live):
                break
            mask = constraint.step_mask(last, V).to(self.dev)  # the next step's
            drawing = [r for g, (rows, _) in enumerate(groups) if live[g] for r in rows if unfinished[r]]
            if drawing and constraint.branches(drawing):
                # feed what was drawn since the last forward (rows with nothing feed a masked pad)
                logits = self._forward(pending)
                pending = [[] for _ in range(n)]
            else:
                logits = None
        for i, r in enumerate(self.rows):
            self.unfed[r] = pending[i]
        return [
            _turn_sample(tokens[i], lp_mask[i], lp_raw[i], constraint.states[i], constraint.allowed[i], trie, tok)
            for i in range(n)
        ]
