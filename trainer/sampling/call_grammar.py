"""The grammar of a policy turn: how a call is written (`CallFormat`), every valid call as
token ids in a trie (`CallTrie`), and the state machine that masks every token that cannot
continue a valid turn (`CallConstraint`, a HF `LogitsProcessor`; one `RowState` per batch
row).  `trainer.sampling.generation` samples under it; see its docstring for the whole turn.
"""

from __future__ import annotations

import json
from typing import Sequence

import attrs

from rlvp_dsl.tools import ToolSpec
from trainer.envs.base import END_TURN, ToolCall, all_calls
from trainer.sampling.tokenizer import encode


#: The ways a call can be written (`CallFormat.style`).
CALL_STYLES = ("plain", "json")


@attrs.frozen
class CallFormat:
    """How a call is written: ``plain`` = ``fetch k3`` (tool, then argument values, by spaces);
    ``json`` = ``{"name": "fetch", "arguments": {"token": "k3"}}``."""

    style: str = attrs.field(default="plain", validator=attrs.validators.in_(CALL_STYLES))

    def render(self, call: ToolCall) -> str:
        if self.style == "json":
            return json.dumps({"name": call.tool, "arguments": dict(call.arguments)})
        return " ".join([call.tool, *[str(v) for v in call.arguments.values()]])

    def describe(self) -> str:
        """One sentence for the system prompt."""
        if self.style == "json":
            return 'Write each call as JSON : {"name": tool, "arguments": {"token": value}} .'
        return "Write each call as the tool name and then its token , for example fetch k0 ."


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
        end_turn: the index in `calls` of the `END_TURN` action (``ToolCall("answer", {})``, the
            last call) when the trie was built for a conversation, else None.
    """

    def __init__(
        self, calls: list[ToolCall], texts: list[str], ids: list[list[int]], eos_id: int, end_turn: int | None = None
    ) -> None:
        self.calls, self.texts, self.ids, self.eos_id, self.end_turn = calls, texts, ids, eos_id, end_turn
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
    def build(
        cls, schema: Sequence[ToolSpec], tokenizer, call_format: CallFormat | None = None, end_turn: bool = False
    ) -> "CallTrie":
        """Enumerate, render and tokenise every call of `schema`; with `end_turn` (a conversation)
        the `END_TURN` action too, as the last call (``answer`` in the plain style).

        Raises ValueError when the schema has no calls, a call's ids do not decode
        back to its text (its span could not be checked), or contain the EOS token,
        or (with `end_turn`) a tool of the schema is named like `END_TURN`.
        """
        fmt = call_format or CallFormat()
        calls = [call for spec in schema for call in all_calls(spec)]
        if end_turn:
            if any(spec.name == END_TURN for spec in schema):
                raise ValueError(f"a tool of the schema is named {END_TURN!r}, the action that ends a user turn")
            calls.append(ToolCall(END_TURN, {}))
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
        return cls(calls, texts, ids, eos, len(calls) - 1 if end_turn else None)

    def is_end_turn(self, call: ToolCall | None) -> bool:
        """Whether `call` is this trie's `END_TURN` action (never for a trie built without it)."""
        return self.end_turn is not None and call is not None and call.tool == END_TURN

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


class RowState:
    __slots__ = ("phase", "pos", "think", "node", "call", "call_start", "n")

    def __init__(self, has_think: bool, root: _Node) -> None:
        self.phase = _OPEN if has_think else _CALL
        self.pos = 0  # position inside a forced sequence
        self.think = 0  # free reasoning tokens so far
        self.node = root
        self.call: int | None = None
        self.call_start = 0  # generated-token offset where the call starts
        self.n = 0  # tokens consumed

    @property
    def in_call(self) -> bool:
        """Whether the turn has reached its call (reasoning, if any, is over)."""
        return self.phase in (_CALL, _DONE)


class CallConstraint:
    """`LogitsProcessor` masking every token that cannot continue a valid turn.

    Construct one per `generate` call: `rows` batch rows, contexts of padded length
    `input_len`.  After generation, `states[r]` tells where row r's call begins and
    which call it is; `allowed[r][t]` is the tuple of ids allowed at generated step t
    (None: the free reasoning vocabulary).
    """

    def __init__(
        self,
        trie: CallTrie,
        rows: int,
        input_len: int,
        think_max: int = 0,
        think_open: Sequence[int] = (),
        think_close: Sequence[int] = (),
        think_ids: Sequence[int] | None = None,
        vocab_size: int | None = None,
    ) -> None:
        import torch

        self.trie, self.input_len, self.think_max = trie, input_len, think_max
        self.think_open, self.think_close = list(think_open), list(think_close)
        self.states = [RowState(think_max > 0, trie.root) for _ in range(rows)]
        self.allowed: list[list[tuple[int, ...] | None]] = [[] for _ in range(rows)]
        self._think_mask = None
        if think_max > 0:
            mask = torch.zeros(vocab_size, dtype=torch.bool)
            mask[list(think_ids)] = True
            if self.think_close:
                mask[self.think_close[0]] = False
            self._think_mask = mask
        # ids a free reasoning step allows: the reasoning vocabulary and the close
        self._think_count = int(self._think_mask.sum()) + bool(self.think_close) if think_max > 0 else 0

    def _advance(self, s: RowState, tok: int) -> None:
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

    def _allowed(self, s: RowState) -> tuple[int, ...] | None:
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

    def step_mask(self, last: Sequence[int] | None, vocab: int):
        """Advance every row by its last sampled token (None at the first step) and return the
        ``[rows, vocab]`` bool mask of the ids each row may take next (built on the CPU)."""
        import torch

        mask = torch.zeros((len(self.states), vocab), dtype=torch.bool)
        rows: list[int] = []  # (rows[k], cols[k]) allowed: one scatter for every row with an id set
        cols: list[int] = []
        for row, s in enumerate(self.states):
            if last is not None and s.phase != _DONE:
                self._advance(s, last[row])
            allowed = self._allowed(s)
            if s.phase != _DONE:
                self.allowed[row].append(allowed)
            if allowed is None:
                mask[row, : self._think_mask.numel()] = self._think_mask
                if self.think_close:
                    mask[row, self.think_close[0]] = True
            else:
                rows.extend([row] * len(allowed))
                cols.extend(allowed)
        if rows:
            mask[rows, cols] = True
        return mask

    def branches(self, rows: Sequence[int]) -> bool:
        """Whether any of `rows` may take more than one id at the step `step_mask` last returned
        (the ``sum > 1`` of their mask rows, from the states instead of the tensor)."""
        for row in rows:
            if self.states[row].phase == _DONE:
                continue  # (the EOS again)
            allowed = self.allowed[row][-1]
            if (self._think_count if allowed is None else len(allowed)) > 1:
                return True
        return False

    def __call__(self, input_ids, scores):
        step = input_ids.shape[1] - self.input_len
        last = input_ids[:, -1].tolist() if step > 0 else None  # one copy to the host per step
        mask = self.step_mask(last, scores.shape[-1])
        return scores.masked_fill(~mask.to(scores.device), float("-inf"))
