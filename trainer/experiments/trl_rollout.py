"""Our tool environments as a TRL ``rollout_func``: real multi-turn episodes sampled from the
model `GRPOTrainer` is training, handed to TRL with what rlvp needs to credit each call.

    class EnvRlvpReward(EnvTagsMixin, RlvpReward): ...   # the environment's tool tags on every call read

    rollout = EnvRollout(env_factory, tasks, GenConfig())
    reward = EnvRlvpReward(rules, call_markers=CALL_MARKERS, tool_tags=rollout.tool_tags)
    trainer = RlvpGRPOTrainer(model, reward_funcs=[outcome_reward, reward],
                              rollout_func=rollout, train_dataset=rollout.dataset(), ...)

(`trainer.experiments.trl_runs.build_trl_run` builds all of it from a training config.)  How an episode
gets to TRL (`EnvRollout.__call__(prompts, trainer)`):

1. Each group of ``num_generations`` equal prompts names one task (`EnvRollout.prompts`);
   `trainer.sampling.rollout.collect_groups` plays G episodes of every group of the batch with
   ``trainer.model`` (unwrapped; a peft model samples through its adapter), as the compact trainer
   does: all of them in one `trainer.sampling.generation.CachedSampler` batch keeping each episode's
   KV cache across turns (forced tokens need no forward pass), under our call mask and the chat
   template's pieces (`trainer.sampling.tokenizer.ChatFormat`): ids exactly as sampled, tool output
   tokenised on its own.  Group j is seeded by ``_seed_of(seed, step, j)``; for the same seeds,
   tasks and model the ids are those `collect_groups` gives with the same call trie.
2. Every call is written between markers, ``<tool_call> fetch k0 </tool_call>``
   (`CallMarkers.marked`, the call trie `collect_groups` samples under; each marker is one word of
   the tiny tokenizer), so
   `RlvpGRPOTrainer` finds the call's tokens with ``call_markers=CALL_MARKERS``: those spans
   are exactly our `Rollout.call_spans`, which `EnvRollout` checks on every row
   (``span_mismatches``).
3. Per completion: ``prompt_ids``, ``completion_ids``, ``logprobs`` (the sampler's, under the
   call mask; 0 on tool tokens), ``env_mask`` (0 on tool-output tokens), and the extra keys
   TRL passes to reward functions as keyword arguments: ``outcome`` (the environment's 0/1,
   `outcome_reward` returns it) and ``rlvp_messages`` (`episode_messages`).

What the stock `RlvpReward` needs from these messages, and where it is:

* **Errors.**  Our environments answer a failed call with ``error ...`` text, which TRL's
  ``{'error': ...}`` signal would read as success; `episode_messages` marks the tool message
  of every failed call ``"error": true``, an error under every chat signal (``trl`` included),
  so the default ``error_signal`` serves.
* **Signals.**  `episode_messages` writes each call's signals (``stages_remaining``) under the
  ``signals`` key of its tool message, and `EnvRollout.dataset` puts the environment's
  signals before any call on the task's user message (the prompt, ``[{"role": "user",
  "content": ..., "signals": {...}}]``), as the compact rollout puts them on the task's
  ``user`` event; `rlvp_dsl.episode_from_messages` reads both, so a ``progress`` rule fires.
* **Tags.**  Chat messages carry no tool tags: the compact rollout puts each call's tags from the
  environment's manifest on its event, while a message read back knows only the tags the rule file
  declares (rules/bfcl.rlvp declares six of BFCL's functions).  `EnvRollout.tool_tags` holds the
  manifest's tags and `EnvTagsMixin` (in front of `RlvpReward`) puts them on every call it reads,
  so a ``tag destructive`` rule fires on the same calls in both trainers (`build_trl_run` uses it).
* **The call mask.**  TRL's loss uses full-softmax log-probs; under them a random tiny policy
  sampled under the mask barely learns (forced tokens such as the markers and the EOS carry
  gradient, and so do ids the sampler could never pick).  `ConstrainedLogprobsMixin`
  renormalises over the ids the mask allowed, as the compact trainer does
  (``constrained_logprobs``).

Importing this module imports neither torch nor trl.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

import attrs

from rlvp_dsl.events import ASSISTANT, CALL, MALFORMED, OK, USER, Episode
from rlvp_dsl.readers import HERMES_MARKERS
from trainer.envs.base import Task, ToolEnv, is_conversation
from trainer.sampling.call_grammar import CallTrie
from trainer.sampling.generation import GenConfig, TurnSample
from trainer.sampling.rollout import MALFORMED_TEXT, collect_groups
from trainer.sampling.tokenizer import encode

#: The markers every call is written between (Hermes/Qwen's, TRL's default parser's).
CALL_MARKERS: tuple[str, str] = HERMES_MARKERS


def _seed_of(*parts: int) -> int:
    h = 0
    for p in parts:
        h = (h * 1_000_003 + int(p)) % (2**31 - 1)
    return h


# ----------------------------------------------------------------------------
# generation: calls between markers
# ----------------------------------------------------------------------------
class CallMarkers:
    """Every call written between `markers`, for one tokenizer.

    `marked(trie)` is `trie` with each call text written ``OPEN text CLOSE`` (the call's span then
    covers the markers, as `rlvp_dsl.call_spans.find_call_spans` finds it); `collect_groups` samples
    under it (its ``call_trie``).  ``ids`` are the markers' token ids.

    Raises:
        ValueError: a marker the tokenizer cannot write (no ids, unknown words, or a call
            that does not decode back to its text).
    """

    def __init__(self, tokenizer: Any, markers: tuple[str, str] = CALL_MARKERS):
        self.tokenizer = tokenizer
        self.markers = markers
        unk = getattr(tokenizer, "unk_token_id", None)
        for marker in markers:
            ids = encode(tokenizer, marker)
            if not ids or (unk is not None and unk in ids) or tokenizer.decode(ids) != marker:
                raise ValueError(
                    f"call marker {marker!r} is not a token sequence of this tokenizer (ids {ids}); "
                    "add it to the vocabulary (`tiny_policy` does)"
                )
        self.ids: tuple[list[int], list[int]] = (encode(tokenizer, markers[0]), encode(tokenizer, markers[1]))
        self._tries: dict[int, tuple[CallTrie, CallTrie]] = {}

    def marked(self, trie: CallTrie) -> CallTrie:
        """`trie` with each call text wrapped in the markers (the same object for the same trie)."""
        if id(trie) not in self._tries:
            open_, close = self.markers
            # a conversation's END_TURN (``answer``) is no call: it is written without the markers
            texts = [t if i == trie.end_turn else f"{open_} {t} {close}" for i, t in enumerate(trie.texts)]
            ids = [encode(self.tokenizer, t) for t in texts]
            for text, seq in zip(texts, ids, strict=True):
                if self.tokenizer.decode(seq) != text:
                    raise ValueError(f"marked call {text!r} does not survive tokenisation")
            self._tries[id(trie)] = (trie, CallTrie(list(trie.calls), texts, ids, trie.eos_id, trie.end_turn))
        return self._tries[id(trie)][1]


class SampledLogprobs:
    """`collect_groups`'s ``on_turn``: keeps the sampler's log-probs of every turn (under the call
    mask, as sampled; 0 for a forced token), and lays them out per completion (`of`)."""

    def __init__(self) -> None:
        self.turns: dict[tuple[int, int], list[tuple[int, list[float]]]] = {}

    def __call__(self, group: int, generation: int, offset: int, sample: TurnSample) -> None:
        self.turns.setdefault((group, generation), []).append((offset, list(sample.logprobs)))

    def of(self, group: int, generation: int, length: int) -> list[float]:
        """Per completion token of episode `generation` of `group` (`length` tokens, nats): the
        sampler's log-prob of each generated token, 0.0 on tool tokens."""
        out = [0.0] * length
        for offset, logprobs in self.turns.get((group, generation), ()):
            out[offset : offset + len(logprobs)] = logprobs
        return out


# ----------------------------------------------------------------------------
# one rollout -> one TRL row
# ----------------------------------------------------------------------------
def episode_messages(episode: Episode) -> list[dict[str, Any]]:
    """The completion part of an episode as OpenAI-style messages: per call an assistant
    message with ``tool_calls`` (a malformed call: its text, markers and all) and the
    ``tool`` message with the environment's text -- for a failed call its error text and
    ``"error": True`` (our error texts are ``error ...``, which no chat signal reads), and
    the call's signals under ``signals``.  A conversation's later turns (`trainer.envs.base.ConversationEnv`)
    come as they happened: each answer an assistant message with its text, each further user message a
    user message with the environment's signals then (the first user message is the prompt's)."""
    messages: list[dict[str, Any]] = []
    for event in episode.events:
        if event.kind == ASSISTANT:
            messages.append({"role": "assistant", "content": event.text})
            continue
        if event.kind == USER:
            if event.index > 0:
                messages.append(task_message(event.text, dict(event.signals)))
            continue
        if event.status == MALFORMED or event.tool is None:
            messages.append({"role": "assistant", "content": event.raw_arguments or ""})
            messages.append({"role": "tool", "content": event.error_text or MALFORMED_TEXT, "error": True})
            continue
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"type": "function", "function": {"name": event.tool, "arguments": dict(event.arguments)}}
                ],
            }
        )
        ok = event.status == OK
        tool_message: dict[str, Any] = {
            "role": "tool",
            "name": event.tool,
            "content": event.result if ok else event.error_text,
        }
        if not ok:
            tool_message["error"] = True
        if event.signals:
            tool_message["signals"] = dict(event.signals)
        messages.append(tool_message)
    return messages


def task_message(text: str, signals: dict[str, Any] | None = None) -> dict[str, Any]:
    """The task's user message: its text and the environment's signals before any call
    (the compact rollout's ``user`` event; a ``progress`` rule's starting value)."""
    message: dict[str, Any] = {"role": "user", "content": text}
    if signals:
        message["signals"] = dict(signals)
    return message


def tool_tags(env: ToolEnv) -> dict[str, frozenset[str]]:
    """Each tool's tags as `env`'s manifest lists them (``{name: tags}``; what the compact rollout
    puts on its call events).  An environment whose manifest lists no tools gives ``{}``."""
    return {t["name"]: frozenset(t.get("tags", ())) for t in env.manifest().get("tools", ())}


def with_tool_tags(episode: Episode, tags: Mapping[str, frozenset[str]]) -> Episode:
    """`episode` with each call of a tool in `tags` carrying that tool's tags too (joined with
    its own); other events, malformed calls and calls of other tools are unchanged."""
    if not tags:
        return episode
    events = tuple(
        attrs.evolve(e, tags=e.tags | tags[e.tool]) if e.kind == CALL and e.tool in tags else e for e in episode.events
    )
    return attrs.evolve(episode, events=events)


class EnvTagsMixin:
    """In front of `rlvp_dsl.integrations.trl.RlvpReward`: every call it reads from a row's
    messages carries the environment's tags for its tool (`with_tool_tags`), as the compact
    rollout's events do -- a rule file that tests tags without declaring every tool (rules/bfcl.rlvp)
    then credits the same calls in both trainers.

        class EnvRlvpReward(EnvTagsMixin, RlvpReward): ...
        reward = EnvRlvpReward("rules/bfcl.rlvp", tool_tags=rollout.tool_tags, call_markers=CALL_MARKERS)

    Args:
        tool_tags: ``{tool name: tags}`` (`EnvRollout.tool_tags`); the other arguments go to the reward.
    """

    def __init__(self, *args: Any, tool_tags: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tool_tags = {str(name): frozenset(tags) for name, tags in (tool_tags or {}).items()}

    def read(self, prompt: Any, completion: Any, messages: Any = None) -> Any:
        row = super().read(prompt, completion, messages)  # type: ignore[misc]
        if row.problem or not self.tool_tags:
            return row
        return attrs.evolve(row, episode=with_tool_tags(row.episode, self.tool_tags))


def outcome_reward(completions: Sequence[Any], outcome: Sequence[float], **kwargs: Any) -> list[float]:
    """The environment's outcome (1.0: the chain completed), from the rollout's ``outcome`` key."""
    return [float(o) for o in outcome]


# ----------------------------------------------------------------------------
# the rollout_func
# ----------------------------------------------------------------------------
class EnvRollout:
    """TRL ``rollout_func`` playing episodes of one of our environments (see the module docstring).

    Args:
        env_factory: returns a fresh environment.
        tasks: the tasks; `dataset()` gives one prompt per task: its user message (`task_message`,
            with the environment's initial signals), the text being the key of `prompts`.
        gen_cfg: sampling settings (`GenConfig`; its temperature should be TRL's).
        seed: seeds the sampling of each group, with the step and the group's position.
        markers: the call markers (`CALL_MARKERS`).
        program: a compiled rule program (`rlvp_dsl.compile.Program`) counting each batch's violations,
            whichever trainer trains (the stock `GRPOTrainer` logs none); None: not counted.

    Attributes:
        tool_tags: each tool's tags from the environment's manifest (`tool_tags`; for `EnvTagsMixin`).
        history: one dict per call (one TRL generation batch): ``step``,
            ``rollout/success_rate``, ``rollout/episodes_generated`` (cumulative),
            ``perf/rollout_s``, ``span_mismatches``, and with a `program`
            ``process/violations_per_episode`` (negative call credits per episode, as
            ``rlvp/violations_per_episode`` counts them).
        span_mismatches: rows whose marker spans differ from the rollout's call spans.
    """

    def __init__(
        self,
        env_factory: Callable[[], ToolEnv],
        tasks: Sequence[Task],
        gen_cfg: GenConfig | None = None,
        *,
        seed: int = 0,
        markers: tuple[str, str] = CALL_MARKERS,
        program: Any = None,
    ):
        self.env_factory = env_factory
        self.program = program
        self.gen_cfg = gen_cfg or GenConfig()
        self.seed = seed
        self.markers = markers
        self.prompts: dict[str, Task] = {}
        self.initial_signals: dict[str, dict[str, Any]] = {}
        env = env_factory()
        self.tool_tags = tool_tags(env)
        # the signals before any call: a conversation's `signals()`, a chain's `initial_signals()`
        initial = env.signals if is_conversation(env) else getattr(env, "initial_signals", None)
        for task in tasks:
            text = f"{task.task_id} : {env.reset(task)}"
            self.prompts[text] = task
            self.initial_signals[text] = dict(initial()) if initial is not None else {}
        self.history: list[dict[str, Any]] = []
        self.episodes_generated = 0
        self.span_mismatches = 0
        self.allowed: dict[tuple[int, ...], list] = {}
        self._markers: CallMarkers | None = None

    def dataset(self):
        """A `datasets.Dataset` with one ``prompt`` per task: a conversation of the task's user
        message (`task_message`), so the stock `RlvpReward` reads the initial signals too."""
        from datasets import Dataset

        return Dataset.from_dict(
            {"prompt": [[task_message(text, self.initial_signals[text])] for text in self.prompts]}
        )

    def _task(self, prompt: Any) -> Task:
        if isinstance(prompt, list):  # a conversation: the task is its (last) user message
            users = [m.get("content") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
            prompt = users[-1] if users else None
        try:
            return self.prompts[prompt]
        except (KeyError, TypeError):
            raise ValueError(
                f"EnvRollout: prompt {str(prompt)[:60]!r} names none of its tasks; train on EnvRollout.dataset()"
            ) from None

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list]:
        import torch

        from rlvp_dsl.attach import call_credits
        from rlvp_dsl.call_spans import find_call_spans

        t0 = time.perf_counter()
        self.allowed.clear()
        G = int(trainer.num_generations)
        if len(prompts) % G:
            raise ValueError(f"EnvRollout: {len(prompts)} prompts is not a whole number of groups of {G}")
        groups = [prompts[g * G : (g + 1) * G] for g in range(len(prompts) // G)]
        tasks = [self._task(group[0]) for group in groups]
        if any(p != group[0] for group in groups for p in group):
            raise ValueError(
                "EnvRollout: a group's prompts differ; TRL repeats each prompt num_generations times in a row"
            )
        model = trainer.accelerator.unwrap_model(trainer.model)
        tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
        if self._markers is None or self._markers.tokenizer is not tokenizer:
            self._markers = CallMarkers(tokenizer, self.markers)
        markers = self._markers
        step = int(trainer.state.global_step)
        out: dict[str, list] = {
            k: []
            for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "rlvp_messages", "outcome", "task_id")
        }
        violations = 0
        logprobs = SampledLogprobs()
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                played = collect_groups(
                    model,
                    tokenizer,
                    self.env_factory,
                    tasks,
                    G,
                    self.gen_cfg,
                    [_seed_of(self.seed, step, g) for g in range(len(tasks))],
                    call_trie=markers.marked,
                    on_turn=logprobs,
                )
        finally:
            model.train(was_training)
        for j, rollouts in enumerate(played):
            for g, r in enumerate(rollouts):
                found = find_call_spans(r.completion_ids, *markers.ids, r.completion_mask)
                self.span_mismatches += int(found != [tuple(s) for s in r.call_spans])
                out["prompt_ids"].append(list(r.prompt_ids))
                out["completion_ids"].append(list(r.completion_ids))
                out["logprobs"].append(logprobs.of(j, g, len(r.completion_ids)))
                out["env_mask"].append(list(r.completion_mask))
                out["rlvp_messages"].append(episode_messages(r.episode))
                out["outcome"].append(float(r.outcome))
                out["task_id"].append(r.task_id)
                self.allowed[tuple(r.completion_ids)] = list(r.allowed_ids or [])
                if self.program is not None:
                    credits = call_credits(r.episode, self.program.score(r.episode))
                    violations += sum(1 for v in credits.values if v < 0)
        self.episodes_generated += len(out["outcome"])
        record = {
            "step": step,
            "rollout/success_rate": sum(out["outcome"]) / max(1, len(out["outcome"])),
            "rollout/episodes_generated": self.episodes_generated,
            "perf/rollout_s": time.perf_counter() - t0,
            "span_mismatches": self.span_mismatches,
        }
        if self.program is not None:
            record["process/violations_per_episode"] = violations / max(1, len(out["outcome"]))
        self.history.append(record)
        return out

    def allowed_mask(self, completion_ids, completion_attention, vocab_size: int):
        """``[B, T, V]`` bool: the ids the call mask allowed at each completion token of the
        latest batch (all True on tool tokens, padding and unknown rows)."""
        import torch

        B, T = completion_ids.shape
        allow = torch.ones(B, T, vocab_size, dtype=torch.bool)
        lengths = completion_attention.sum(dim=1).tolist()
        for i, (row, n) in enumerate(zip(completion_ids.tolist(), lengths)):
            for t, ids in enumerate(self.allowed.get(tuple(row[: int(n)]), [])):
                if ids is not None:
                    allow[i, t] = False
                    allow[i, t, list(ids)] = True
        return allow.to(completion_ids.device)


def allowed_logprobs(logits: Any, allow: Any, ids: Any, compute_entropy: bool) -> tuple[Any, Any, None]:
    """Log-probs of `ids` renormalised over the allowed ids, as TRL's
    ``_get_per_token_logps_and_entropies`` returns them: ``(logp [B, T], entropy [B, T] or None, None)``.

    Args:
        logits: ``[B, T, V]`` float logits (temperature applied).
        allow: ``[B, T, V]`` bool, True where the call mask allowed the id.
        ids: ``[B, T]`` the tokens whose log-probs are wanted.
        compute_entropy: also return the entropy of the renormalised distribution (no gradient).
    """
    import torch

    logsm = torch.log_softmax(logits.masked_fill(~allow, float("-inf")), dim=-1)  # (B, T, V)
    logp = logsm.gather(-1, ids[..., None]).squeeze(-1)  # (B, T)
    ent = None
    if compute_entropy:
        with torch.no_grad():
            p = logsm.exp()
            ent = -(p * torch.where(p > 0, logsm, torch.zeros_like(logsm))).sum(-1)
    return logp, ent, None


class ConstrainedLogprobsMixin:
    """TRL's per-token log-probs renormalised over the ids the call mask allowed when each
    token was sampled (the compact trainer's ``constrained_logprobs``): the ratio, the
    gradient and the entropy are those of the policy that sampled."""

    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **kwargs,
    ):

        if not hasattr(self.rollout_func, "allowed_mask"):
            raise TypeError("ConstrainedLogprobsMixin needs an EnvRollout as rollout_func (it knows the call mask)")
        T = logits_to_keep
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, -T - 1 : -1].float()  # (B, T, V)
        logits = logits / self.temperature
        allow = self.rollout_func.allowed_mask(input_ids[:, -T:], attention_mask[:, -T:], logits.shape[-1])
        return allowed_logprobs(logits, allow, input_ids[:, -T:], compute_entropy)
