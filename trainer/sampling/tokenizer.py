"""Tokenizers and the chat-template pieces the multi-turn rollout appends.

Two jobs:

1. `build_tiny_tokenizer(words)`: the embedded default tokenizer, built locally
   with the HF `tokenizers` library (no downloads): a word-level vocabulary of the
   given words plus a few special tokens and a chat template, wrapped as a
   `PreTrainedTokenizerFast`.  Deterministic: the same words give the same ids.
2. `ChatFormat.from_tokenizer(tok)`: the chat template cut into the pieces a
   multi-turn episode needs -- the prompt, the text that closes an assistant turn,
   the text around a tool message, the generation prompt -- found once by
   rendering sentinel messages.  The rollout tokenises each piece *separately* and
   appends its ids; the whole conversation is never re-rendered or re-tokenised,
   so the ids the policy generated stay exactly as sampled even when the template
   would rewrite earlier turns (e.g. strip their reasoning) or the tokenizer would
   merge across a turn boundary.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import attrs

PAD, UNK = "<|pad|>", "<|unk|>"
END = "<|end|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>", "<|tool|>")
SPECIAL_TOKENS = (PAD, UNK, END) + ROLE_TOKENS
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
TINY_CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|> {{ message['content'] }} <|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)
# Words every tiny vocabulary carries (template words, digits, think markers).
BASE_WORDS = tuple(str(i) for i in range(10)) + (THINK_OPEN, THINK_CLOSE, ".", ",", ":", ";")


def build_tiny_tokenizer(words: Iterable[str]):
    """A word-level `PreTrainedTokenizerFast` over `words` (split on whitespace).

    Ids: the special tokens first (``<|pad|>`` = 0, ``<|unk|>`` = 1, ``<|end|>`` = 2,
    role tokens), then `BASE_WORDS` and `words` in sorted order.  ``<|end|>`` is the
    EOS token (it ends an assistant turn), ``<|pad|>`` the padding token.  Decoding
    joins words with single spaces, so a text whose words are separated by single
    spaces decodes back to itself.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {}
    for token in SPECIAL_TOKENS + tuple(sorted(set(BASE_WORDS) | {w for w in words if w.strip()})):
        if any(ch.isspace() for ch in token):
            raise ValueError(f"tiny tokenizer: word {token!r} contains whitespace")
        vocab.setdefault(token, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD,
        unk_token=UNK,
        eos_token=END,
        additional_special_tokens=list(ROLE_TOKENS),
    )
    tok.chat_template = TINY_CHAT_TEMPLATE
    tok.padding_side = "left"
    return tok


def encode(tokenizer, text: str) -> list[int]:
    """Token ids of `text` on its own (no BOS/EOS added)."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _render(tokenizer, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(
        [dict(m) for m in messages], tokenize=False, add_generation_prompt=add_generation_prompt
    )


@attrs.frozen
class ChatFormat:
    """A chat template cut into the pieces of a multi-turn tool episode.

    Attributes:
        assistant_close: text the template puts after an assistant message's content.
        tool_open / tool_close: text before / after a tool message's content.
        generation_prompt: text that opens the next assistant turn.
        eos_id: the token that ends a generated turn (the tokenizer's EOS).
        eos_text: its text; when `assistant_close` contains it, the generated EOS
            stands for that part of the close and only the rest is appended.
        tool_role: the role tool outputs are sent as (``tool``, or ``user`` for
            templates that reject a tool role).
        user_open / user_close: text before / after a user message that follows an
            assistant turn (a conversation's next user turn); None when the template
            cannot render one after an assistant message the same way (`user_turn_text` raises).
    """

    assistant_close: str
    tool_open: str
    tool_close: str
    generation_prompt: str
    eos_id: int
    eos_text: str
    tool_role: str = "tool"
    user_open: str | None = None
    user_close: str | None = None

    @classmethod
    def from_tokenizer(cls, tokenizer) -> "ChatFormat":
        """Derive the pieces by rendering sentinel messages with the tokenizer's template.

        Raises ValueError when the tokenizer has no chat template, no EOS token, or a
        template whose rendering of a longer conversation does not extend the
        rendering of its prefix (the pieces would then not be well defined).
        """
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                "tokenizer has no chat_template; set one (see trainer.sampling.tokenizer.TINY_CHAT_TEMPLATE)"
            )
        if tokenizer.eos_token_id is None:
            raise ValueError("tokenizer has no eos_token; the end of a generated turn needs one")
        a_text, t_text = "\x01ASSISTANT\x01", "\x01TOOL\x01"
        head = [{"role": "user", "content": "\x01USER\x01"}, {"role": "assistant", "content": a_text}]
        r1 = _render(tokenizer, head, False)
        assistant_close = r1[r1.index(a_text) + len(a_text) :]
        tool_role, r2 = "tool", None
        for role in ("tool", "user"):
            try:
                r2 = _render(tokenizer, head + [{"role": role, "content": t_text}], False)
                tool_role = role
                break
            except Exception:  # a template may raise on an unknown role: try the next one
                continue
        if r2 is None or not r2.startswith(r1):
            raise ValueError(
                "chat template: rendering [user, assistant, tool] does not start with the rendering of "
                "[user, assistant]; cannot cut it into per-turn pieces"
            )
        tool_open = r2[len(r1) : r2.index(t_text)]
        tool_close = r2[r2.index(t_text) + len(t_text) :]
        r3 = _render(tokenizer, head + [{"role": tool_role, "content": t_text}], True)
        if not r3.startswith(r2):
            raise ValueError("chat template: the generation prompt does not extend the rendered conversation")
        user_open, user_close = _user_pieces(tokenizer, head, r1, r3[len(r2) :])
        return cls(
            assistant_close=assistant_close,
            tool_open=tool_open,
            tool_close=tool_close,
            generation_prompt=r3[len(r2) :],
            eos_id=int(tokenizer.eos_token_id),
            eos_text=str(tokenizer.eos_token),
            tool_role=tool_role,
            user_open=user_open,
            user_close=user_close,
        )

    def prompt_ids(self, tokenizer, messages: Sequence[Mapping[str, str]]) -> list[int]:
        """Ids of the rendered `messages` plus the generation prompt (the episode's prompt)."""
        return encode(tokenizer, _render(tokenizer, messages, True))

    def after_turn_text(self, observation: str, ended_with_eos: bool, next_turn: bool) -> str:
        """Text appended after a generated turn: its close, the tool message, maybe a new turn.

        `ended_with_eos`: the generated ids already end with the EOS token, which then
        stands for the part of `assistant_close` up to and including the EOS text.
        """
        close = self.assistant_close
        if ended_with_eos and self.eos_text in close:
            close = close[close.index(self.eos_text) + len(self.eos_text) :]
        text = close + self.tool_open + observation + self.tool_close
        return text + self.generation_prompt if next_turn else text

    def after_turn_ids(self, tokenizer, observation: str, ended_with_eos: bool, next_turn: bool) -> list[int]:
        """`after_turn_text` tokenised on its own (loss mask 0 in the rollout)."""
        return encode(tokenizer, self.after_turn_text(observation, ended_with_eos, next_turn))

    def user_turn_text(self, message: str | None, ended_with_eos: bool) -> str:
        """Text appended after an answer (an assistant turn that ends a user turn): its close, then
        the next user message and a new generation prompt; only the close when `message` is None
        (the conversation is over).  Raises ValueError when the template has no user-turn pieces."""
        close = self.assistant_close
        if ended_with_eos and self.eos_text in close:
            close = close[close.index(self.eos_text) + len(self.eos_text) :]
        if message is None:
            return close
        if self.user_open is None or self.user_close is None:
            raise ValueError(
                "chat template: a user message after an assistant turn does not render as a piece of its own; "
                "a conversation environment cannot be played with this tokenizer"
            )
        return close + self.user_open + message + self.user_close + self.generation_prompt

    def user_turn_ids(self, tokenizer, message: str | None, ended_with_eos: bool) -> list[int]:
        """`user_turn_text` tokenised on its own (loss mask 0 in the rollout)."""
        return encode(tokenizer, self.user_turn_text(message, ended_with_eos))


def _user_pieces(
    tokenizer, head: list[dict[str, str]], rendered_head: str, generation_prompt: str
) -> tuple[str | None, str | None]:
    """The text around a user message that follows `head` (ending with an assistant message), or
    (None, None) when the template renders it otherwise (not as an extension, or another prompt)."""
    u_text = "\x01USER2\x01"
    try:
        r = _render(tokenizer, head + [{"role": "user", "content": u_text}], False)
        r_gen = _render(tokenizer, head + [{"role": "user", "content": u_text}], True)
    except Exception:  # a template may reject two user turns; only conversations need them
        return None, None
    if u_text not in r or not r.startswith(rendered_head) or r_gen != r + generation_prompt:
        return None, None
    return r[len(rendered_head) : r.index(u_text)], r[r.index(u_text) + len(u_text) :]
