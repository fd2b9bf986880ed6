"""Multi-turn group rollouts: G episodes of one task, as token ids and as rlvp events.

`collect_groups(policy, tokenizer, env_factory, tasks, num_generations, gen_cfg, seeds)`
plays `num_generations` episodes of each task side by side: with a HF model, all of
them in one `trainer.sampling.generation.CachedSampler` batch that keeps every episode's KV
cache across turns (group j sampled from its own generator seeded by ``seeds[j]``);
with a `sample_turns` object, one group at a time, the still active episodes re-fed
through one call per turn.  Both give a group the same rollouts for the same seed.
`collect_group(..., task, ..., seed)` is the one-group case.
Two keyword hooks let another front end sample through the same path (the TRL rollout,
`trainer.experiments.trl_rollout.EnvRollout`): ``call_trie`` rewrites the call trie sampled
under (every call between markers), ``on_turn`` sees every sampled turn (its log-probs).

How the training sequence is built (never by re-tokenising text):

* ``prompt_ids``: the chat template rendered for [system, user(task text)] plus the
  generation prompt, tokenised once.
* per turn: the ids the policy generated, exactly as sampled (mask 1, with the ids the
  call mask allowed per token in ``allowed_ids``), then the turn's close, the tool
  message and the next generation prompt, tokenised *on their own* and appended
  (mask 0, allowed None).
* ``call_spans[k]``: the positions of call k's own tokens among the generated ids
  (reasoning text and the EOS excluded), so the span decodes to exactly the call.

The next turn's context is the very same ids, so what is trained on is what the
policy saw.  Each `Rollout.episode` starts with a ``user`` event (the task text),
then one ``call`` event per call (status ok / error / malformed, result, the tool's
tags from the environment manifest, the ``stages_remaining`` signal).

Conversations (`trainer.envs.base.ConversationEnv`, docs/trainer.md "Conversations"): the
call mask also offers `END_TURN` (``answer``).  When the policy answers, the rollout writes an
``assistant`` event and calls ``env.end_turn()``; the next user message, if any, is appended
as a user turn of the chat template (the close, the user message, the next generation prompt,
tokenised on their own, mask 0) with a ``user`` event carrying ``env.signals()``; None ends
the episode.  After ``max_calls_per_turn`` calls in one user turn the answer is *forced*: the
rollout itself appends the tool message, the generation prompt and `END_TURN`'s trie ids plus
the EOS -- all mask 0, the policy did not choose them, so no gradient and no count in the loss
-- then ends the turn as above.  ``max_turns`` caps the calls of the whole episode.
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence

from rlvp_dsl.events import ASSISTANT, CALL, MALFORMED, USER, Episode, Event
from trainer.merged_lora import merged_lora
from trainer.envs.base import END_TURN, Task, ToolCall, ToolEnv, all_calls, is_conversation
from trainer.sampling.call_grammar import CallFormat, CallTrie
from trainer.sampling.generation import CachedSampler, GenConfig, TurnSample
from trainer.sampling.tokenizer import ChatFormat, encode
from trainer.types import Rollout

MALFORMED_TEXT = "error malformed call"
#: A conversation whose environment has not ended after this many answers is a broken environment.
MAX_ANSWERS = 10_000
# Caches keyed by the tokenizer's id; each entry keeps the tokenizer alive, so an id is never reused.
_TRIES: dict[tuple, tuple[object, CallTrie]] = {}
_CHATS: dict[int, tuple[object, ChatFormat]] = {}


class TurnHook(Protocol):
    """``on_turn(group, generation, offset, sample)``: group `group`'s episode `generation` sampled
    `sample`, whose ids are ``completion_ids[offset : offset + len(sample.ids)]`` of its rollout."""

    def __call__(self, group: int, generation: int, offset: int, sample: TurnSample) -> None: ...


def system_prompt(env: ToolEnv, call_format: CallFormat, tools: Sequence[str] | None = None) -> str:
    """The system message: the tools on offer (`tools`, default: the schema's) and how to write a
    call; for a conversation also how to answer the user (`END_TURN`)."""
    names = [spec.name for spec in env.schema()] if tools is None else list(tools)
    text = f"Call one tool per turn . Tools : {' , '.join(names)} . {call_format.describe()}"
    if is_conversation(env):
        text += f" To answer the user and end your turn , write {call_format.render(ToolCall(END_TURN, {}))} ."
    return text


def prompt_words(env: ToolEnv, call_styles: Sequence[str] = ("plain",)) -> set[str]:
    """Every word an episode of `env` can contain (for building the tiny tokenizer's vocabulary).

    A conversation's schema is per task (valid only after `reset`): its words come from
    `vocabulary()` (tool names and values included), and a ``json``-style call's words from
    each vocabulary word in the four places JSON puts one (``{"w":``, ``"w":``, ``"w",``,
    ``"w"}}``), which covers single-word values."""
    words = set(env.vocabulary()) | set(MALFORMED_TEXT.split())
    conversation = is_conversation(env)
    for style in call_styles:
        fmt = CallFormat(style)
        if conversation:
            words.update(system_prompt(env, fmt, tools=()).split())
            if style == "json":
                vocab = set(env.vocabulary()) | {END_TURN, "name", "arguments"}
                words.update(w2 for w in vocab for w2 in (f'{{"{w}":', f'"{w}":', f'"{w}",', f'"{w}"}}}}'))
                words.update(fmt.render(ToolCall(END_TURN, {})).split())
            continue
        words.update(system_prompt(env, fmt).split())
        for spec in env.schema():
            for call in all_calls(spec):
                words.update(fmt.render(call).split())
    return words


def _trie(env: ToolEnv, tokenizer, call_format: CallFormat) -> CallTrie:
    schema = tuple(env.schema())
    end_turn = is_conversation(env)
    # ToolSpec equality ignores `values`: the key spells out what the trie is built from
    calls = tuple((s.name, s.params, tuple(s.values_for(p) for p in s.params or ())) for s in schema)
    key = (id(tokenizer), call_format.style, calls, end_turn)
    if key not in _TRIES:
        _TRIES[key] = (tokenizer, CallTrie.build(schema, tokenizer, call_format, end_turn=end_turn))
    return _TRIES[key][1]


def _manifest_tags(env: ToolEnv) -> dict[str, frozenset[str]]:
    """Each tool's tags, as the environment's manifest lists them."""
    return {tool["name"]: frozenset(tool.get("tags", ())) for tool in env.manifest().get("tools", ())}


def _chat(tokenizer) -> ChatFormat:
    if id(tokenizer) not in _CHATS:
        _CHATS[id(tokenizer)] = (tokenizer, ChatFormat.from_tokenizer(tokenizer))
    return _CHATS[id(tokenizer)][1]


class _TextIds:
    """`encode(tokenizer, text)` remembered for the texts of one `collect_groups` call: the same
    tool message comes back many times in a batch (a tokenizer gives a text the same ids every
    time, and none changes during a call); each call returns a fresh list."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.ids: dict[str, list[int]] = {}

    def __call__(self, text: str) -> list[int]:
        ids = self.ids.get(text)
        if ids is None:
            ids = self.ids[text] = encode(self.tokenizer, text)
        return list(ids)


class _Episode:
    """Growing state of one rollout."""

    def __init__(self, env: ToolEnv, observation: str, conversation: bool) -> None:
        self.env = env
        self.ids: list[int] = []
        self.mask: list[int] = []
        self.allowed: list[tuple[int, ...] | None] = []
        self.spans: list[tuple[int, int]] = []
        self.turn_spans: dict[int, tuple[int, int]] = {}  # answer event -> its sampled tokens
        self.call_texts: list[str] = []
        # the environment's signals before any call (stages_remaining = N) ride on the task's
        # user turn, so a progress rule credits the very first stage too
        self.conversation = conversation
        initial = env.signals if self.conversation else getattr(env, "initial_signals", None)  # type: ignore[attr-defined]
        self.events: list[Event] = [
            Event(index=0, kind=USER, text=observation, signals=dict(initial()) if initial is not None else {})
        ]
        self.done = False
        self.calls = 0  # calls of the episode
        self.turn_calls = 0  # calls since the current user message (conversations)
        self.answers = 0  # END_TURN actions (conversations)
        self.forced = 0  # ... of which the rollout forced

    def append(self, ids, mask_value, allowed=None) -> None:
        self.ids.extend(ids)
        self.mask.extend([mask_value] * len(ids))
        self.allowed.extend(allowed if allowed is not None else [None] * len(ids))


class _Group:
    """One task's G episodes being played, and what every turn of them needs."""

    def __init__(
        self,
        tokenizer,
        env_factory: Callable[[], ToolEnv],
        task: Task,
        num_generations: int,
        cfg: GenConfig,
        seed: int,
        call_trie: Callable[[CallTrie], CallTrie] | None = None,
        text_ids: _TextIds | None = None,
    ) -> None:
        if num_generations < 1:
            raise ValueError(f"'num_generations' must be >= 1 (got {num_generations})")
        fmt = CallFormat(cfg.call_style)
        envs = [env_factory() for _ in range(num_generations)]
        observations = [env.reset(task) for env in envs]
        self.task, self.seed, self.tokenizer = task, seed, tokenizer
        self.trie = _trie(envs[0], tokenizer, fmt)
        if call_trie is not None:
            self.trie = call_trie(self.trie)
        self.chat = _chat(tokenizer)
        self.text_ids = text_ids or _TextIds(tokenizer)
        self.tags = _manifest_tags(envs[0])
        messages = [{"role": "user", "content": observations[0]}]
        if cfg.system_prompt:
            messages.insert(0, {"role": "system", "content": system_prompt(envs[0], fmt)})
        self.prompt_ids = self.chat.prompt_ids(tokenizer, messages)
        conversation = is_conversation(envs[0])  # one factory: one kind of environment
        self.episodes = [_Episode(env, obs, conversation) for env, obs in zip(envs, observations, strict=True)]
        self.max_turns = cfg.max_turns or envs[0].max_turns

    def play(self, ep: _Episode, sample: TurnSample, turn: int) -> list[int]:
        """Record `sample` as `ep`'s turn `turn`, step the environment; returns the ids appended after it."""
        offset = len(ep.ids)
        ep.append(sample.ids, 1, sample.allowed)
        if ep.conversation and self.trie.is_end_turn(sample.call):
            ep.turn_spans[len(ep.events)] = (offset + sample.call_start, offset + sample.call_end)
            return self._answer(ep, sample.ended_with_eos, forced=False)
        ep.spans.append((offset + sample.call_start, offset + sample.call_end))
        ep.call_texts.append(sample.call_text)
        index = len(ep.events)
        if sample.call is None:
            observation = MALFORMED_TEXT
            ep.events.append(
                Event(
                    index=index,
                    kind=CALL,
                    tool=None,
                    raw_arguments=sample.call_text,
                    status=MALFORMED,
                    error_text=observation,
                )
            )
            finished = False
        else:
            result = ep.env.step(sample.call)
            observation = result.text
            ep.events.append(result.event(index, sample.call, self.tags.get(sample.call.tool, frozenset())))
            finished = result.done
        ep.calls += 1
        ep.turn_calls += 1
        ep.done = finished or ep.calls >= self.max_turns
        after = self.text_ids(self.chat.after_turn_text(observation, sample.ended_with_eos, next_turn=not ep.done))
        ep.append(after, 0)
        if ep.done or not ep.conversation or ep.turn_calls < ep.env.max_calls_per_turn:  # type: ignore[attr-defined]
            return after
        # the turn's calls are spent: the rollout answers for the policy (mask 0, not a choice of the policy)
        assert self.trie.end_turn is not None
        forced = self.trie.ids[self.trie.end_turn] + [self.trie.eos_id]
        ep.append(forced, 0)
        return after + forced + self._answer(ep, ended_with_eos=True, forced=True)

    def _answer(self, ep: _Episode, ended_with_eos: bool, forced: bool) -> list[int]:
        """`ep` answered its user turn: an ``assistant`` event, ``env.end_turn()``, then the next user
        turn (ids mask 0, a ``user`` event) or the end of the episode; returns the ids appended."""
        ep.events.append(Event(index=len(ep.events), kind=ASSISTANT, text=END_TURN))
        ep.answers += 1
        ep.forced += forced
        ep.turn_calls = 0
        message = ep.env.end_turn("")  # type: ignore[attr-defined]
        if message is None:
            ep.done = True
        elif ep.answers >= MAX_ANSWERS:
            raise RuntimeError(
                f"environment {ep.env.name!r}: end_turn() gave a user message after {MAX_ANSWERS} answers"
            )
        else:
            ep.events.append(Event(index=len(ep.events), kind=USER, text=message, signals=dict(ep.env.signals())))  # type: ignore[attr-defined]
        ids = self.text_ids(self.chat.user_turn_text(message, ended_with_eos))
        ep.append(ids, 0)
        return ids

    def rollouts(self) -> list[Rollout]:
        out = []
        task = self.task
        for g, ep in enumerate(self.episodes):
            outcome = float(ep.env.outcome())
            episode = Episode(
                id=f"{task.task_id}#{g}",
                events=ep.events,
                outcome=outcome,
                source=ep.env.name,
                meta={"task_id": task.task_id, "seed": self.seed, "generation": g},
            )
            out.append(
                Rollout(
                    task_id=task.task_id,
                    prompt_ids=list(self.prompt_ids),
                    completion_ids=ep.ids,
                    completion_mask=ep.mask,
                    call_spans=ep.spans,
                    episode=episode,
                    outcome=outcome,
                    allowed_ids=ep.allowed,
                    turn_spans=ep.turn_spans,
                    info={
                        "call_texts": ep.call_texts,
                        "call_event_indices": [e.index for e in episode.calls],
                        "num_turns": len(ep.spans),
                        "env": ep.env.name,
                        **({"answers": ep.answers, "forced_answers": ep.forced} if ep.conversation else {}),
                        # an env's own verdict on the episode when it has one (bfcl: BFCL's checker result)
                        **({"verdict": ep.env.verdict()} if callable(getattr(ep.env, "verdict", None)) else {}),
                    },
                )
            )
        return out


def collect_group(
    policy,
    tokenizer,
    env_factory: Callable[[], ToolEnv],
    task: Task,
    num_generations: int,
    gen_cfg: GenConfig | None = None,
    seed: int = 0,
    *,
    call_trie: Callable[[CallTrie], CallTrie] | None = None,
) -> list[Rollout]:
    """Play `num_generations` episodes of `task`; returns one `Rollout` per episode.

    Args:
        policy: a HF causal LM (optionally peft-wrapped; sampled by `CachedSampler`), or any
            object with `sample_turns(contexts, trie, cfg)` (e.g. `trainer.sampling.generation.HFGenerator`,
            `trainer.sampling.vllm_backend.VLLMGenerator`), which gets each whole context every turn.
        tokenizer: the policy's tokenizer (needs a chat template and an EOS token).
        env_factory: returns a fresh environment per call.
        task: the task all episodes attempt.
        num_generations: G, the group size.
        gen_cfg: sampling settings (`GenConfig`).
        seed: seeds the sampling; the global torch RNG is left as it was.
        call_trie: see `collect_groups`.
    Raises ValueError for G < 1 or a tokenizer/schema that cannot express the calls.
    """
    return collect_groups(
        policy, tokenizer, env_factory, [task], num_generations, gen_cfg, [seed], call_trie=call_trie
    )[0]


def collect_groups(
    policy,
    tokenizer,
    env_factory: Callable[[], ToolEnv],
    tasks: Sequence[Task],
    num_generations: int,
    gen_cfg: GenConfig | None = None,
    seeds: Sequence[int] | None = None,
    *,
    call_trie: Callable[[CallTrie], CallTrie] | None = None,
    on_turn: TurnHook | None = None,
) -> list[list[Rollout]]:
    """One group of `num_generations` episodes per task, ``groups[j]`` seeded by ``seeds[j]``.

    A HF model plays all groups together: one `CachedSampler` batch of every episode,
    each keeping its KV cache across turns, with group j's draws from its own generator
    seeded by ``seeds[j]`` -- so a group's rollouts are the ones `collect_group` gives it
    alone.  A `sample_turns` object plays one group at a time, re-fed every turn, under
    the global torch RNG seeded by the group's seed (forked: the caller's RNG is left as it was).

    Args:
        call_trie: maps the environment's call trie to the one sampled under, e.g. every call
            written between markers (`trainer.experiments.trl_rollout.CallMarkers.marked`); it must
            keep the calls and their order, and give the same trie object for the same trie (tasks
            sharing a trie share a batch).  None: the environment's trie.
        on_turn: called after every sampled turn with ``(group, generation, offset, sample)``
            (`TurnHook`), e.g. to keep the sampler's log-probs (`TurnSample.logprobs`).
    """
    import torch

    cfg = gen_cfg or GenConfig()
    seeds = list(seeds) if seeds is not None else list(range(len(tasks)))
    if len(seeds) != len(tasks):
        raise ValueError(f"{len(seeds)} seeds for {len(tasks)} tasks")
    text_ids = _TextIds(tokenizer)
    groups = [
        _Group(tokenizer, env_factory, task, num_generations, cfg, seed, call_trie, text_ids)
        for task, seed in zip(tasks, seeds)
    ]
    index = {id(group): j for j, group in enumerate(groups)}
    if hasattr(policy, "sample_turns"):
        for j, group in enumerate(groups):
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(group.seed)
                _play_refed(policy, group, cfg, j, on_turn)
        return [g.rollouts() for g in groups]
    by_trie: dict[int, list[_Group]] = {}
    for group in groups:  # one batch per call mask (tasks of one environment share it)
        by_trie.setdefault(id(group.trie), []).append(group)
    with merged_lora(policy):  # the weights stay as they are while sampling: merge once
        for batch in by_trie.values():
            _play_cached(policy, tokenizer, batch, cfg, index, on_turn)
    return [g.rollouts() for g in groups]


def _play_refed(generator, group: _Group, cfg: GenConfig, j: int, on_turn: TurnHook | None) -> None:
    turn = 0  # one policy turn (a call or an answer) per round; every episode ends (calls capped, answers finite)
    while active := [(g, ep) for g, ep in enumerate(group.episodes) if not ep.done]:
        samples = generator.sample_turns([group.prompt_ids + ep.ids for _, ep in active], group.trie, cfg)
        for (g, ep), sample in zip(active, samples, strict=True):
            if on_turn is not None:
                on_turn(j, g, len(ep.ids), sample)
            group.play(ep, sample, turn)
        turn += 1


def _play_cached(
    model, tokenizer, groups: list[_Group], cfg: GenConfig, index: dict[int, int], on_turn: TurnHook | None
) -> None:
    import torch

    from trainer.batch import device_of

    rows = [(group, ep) for group in groups for ep in group.episodes]
    generation = [g for group in groups for g in range(len(group.episodes))]
    sampler = CachedSampler(model, tokenizer, len(rows))
    dev = device_of(model)
    gens = {id(g): torch.Generator(device=dev).manual_seed(int(g.seed)) for g in groups}
    new: dict[int, list[int]] = {i: list(group.prompt_ids) for i, (group, _) in enumerate(rows)}
    turn = 0
    while active := [i for i, (_, ep) in enumerate(rows) if not ep.done]:
        sampler.keep(active)
        by_group: dict[int, list[int]] = {}
        for pos, i in enumerate(active):
            by_group.setdefault(id(rows[i][0]), []).append(pos)
        samples = sampler.sample_turn(
            [new[i] for i in active],
            groups[0].trie,
            cfg,
            [(positions, gens[key]) for key, positions in by_group.items()],
        )
        for i, sample in zip(active, samples, strict=True):
            group, ep = rows[i]
            if on_turn is not None:
                on_turn(index[id(group)], generation[i], len(ep.ids), sample)
            new[i] = group.play(ep, sample, turn)
        turn += 1
