"""Our tool environments through TRL's own multi-turn loop (``GRPOTrainer(environment_factory=...)``).

    trainer, setup = build_env_factory_trainer(load_config("examples/chain4.toml"), steps=60, out_dir="runs/ef")
    trainer.train()

    # by hand: the class, grammar and dataset for an environment, a tokenizer from `tool_tokenizer`
    setup = build_env_factory(env_factory, tokenizer, max_turns=12)
    Trainer = type("T", (GrammarLogprobsMixin, RlvpGRPOTrainer), {})   # reward: EnvMessagesMixin + RlvpReward
    trainer = Trainer(model, reward_funcs=[reward], environment_factory=setup.environment,
                      train_dataset=setup.dataset(tasks), processing_class=tokenizer, ...)
    trainer.call_grammar = setup.grammar
    constrain(trainer.model, setup.grammar)  # the call grammar on model.generate

What TRL 1.16 asks of an environment (trl/trainer/grpo_trainer.py, ``environment_factory``): a
class whose public methods are the tools (type hints and a Google-style docstring, which
``transformers.utils.get_json_schema`` turns into the tool schema), a ``reset(**row)`` called
with the dataset row before each rollout, and optionally ``get_reward()`` (a reward column of
weight 1 named after the class).  TRL renders the prompt with the chat template (``tools=`` the
methods), generates with ``model.generate``, parses each completion with
``tokenizer.parse_response`` and, while a completion holds ``tool_calls``, calls the methods and
generates again after the tool messages (at most ``max_tool_calling_iterations`` times), every
completion re-encoding its whole context (no KV cache across turns).

What this module adds, and why:

1. `environment_class`: a `ToolEnv` as such a class -- one method per tool of its schema
   (``fetch(token: str) -> str`` ...), ``reset`` building the task from the row's ``task_id``
   and ``seed``, ``get_reward`` = the environment's outcome.  A failed call answers the
   environment's error text (the words the policy sees in the compact trainer); the wrapper
   keeps each call's status and signals and writes them as `trl_rollout.episode_messages` does
   (`EnvToolWrapper.messages`), which `EnvMessagesMixin` hands to `RlvpReward`.
2. `tool_tokenizer`: the tiny word-level tokenizer with a chat template that renders tool calls
   (``<tool_call> {"name": ..., "arguments": {...}} </tool_call>``, Hermes/Qwen markers) and a
   ``response_template`` for transformers' ``parse_response`` (TRL's ``add_response_schema``
   knows only published templates).  The template is prefix-preserving, so TRL keeps it.
3. `CallGrammar`: the call mask of `trainer.sampling.call_grammar` as a stateless
   ``LogitsProcessor`` on ``model.generate`` (each row's state read back from its ids).  TRL
   offers guided decoding only through vLLM; without it a random tiny model never writes a
   parsable call and there is no multi-turn episode to compare.  After ``max_turns`` tool
   messages, or a tool message holding one of `build_env_factory`'s done words, only EOS is allowed
   (TRL generates once more after every tool message; that turn is the EOS alone).
4. `GrammarLogprobsMixin`: TRL's log-probs renormalised over the ids the grammar allowed, as
   `trl_rollout.ConstrainedLogprobsMixin` does for ``rollout_func`` runs.

Importing this module imports neither torch nor trl.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

import attrs

from trainer.envs.base import Task, ToolCall, ToolEnv
from trainer.experiments.trl_rollout import CALL_MARKERS, allowed_logprobs, episode_messages, task_message, tool_tags
from trainer.sampling.call_grammar import CallFormat, CallTrie
from trainer.sampling.rollout import system_prompt
from trainer.sampling.tokenizer import encode

#: The tiny tokenizer's chat template with tool calls (one word per JSON piece, as `CallFormat("json")`).
TOOL_CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|> "
    "{% if message.get('tool_calls') %}{% for tc in message['tool_calls'] %}"
    '{{ "<tool_call>" }} {"name": "{{ tc[\'function\'][\'name\'] }}", "arguments": '
    "{{ tc['function']['arguments'] | tojson }}} {{ \"</tool_call>\" }} {% endfor %}"
    "{% else %}{{ message['content'] }} {% endif %}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)
#: How transformers' ``parse_response`` reads one generated turn of `TOOL_CHAT_TEMPLATE`.
RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|assistant|>",
    "fields": {
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"\s*</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"\s*<\|end\|>\s*", "content": "text"},
    },
}
CALL_STYLE = CallFormat("json")


def tool_tokenizer(tokenizer: Any) -> Any:
    """`tokenizer` (the tiny one, `trl_runs.tiny_policy`'s, with the JSON words and the call
    markers in its vocabulary) with `TOOL_CHAT_TEMPLATE` and `RESPONSE_TEMPLATE` set; returned."""
    tokenizer.chat_template = TOOL_CHAT_TEMPLATE
    tokenizer.response_template = RESPONSE_TEMPLATE
    return tokenizer


# ----------------------------------------------------------------------------
# the environment TRL instantiates
# ----------------------------------------------------------------------------
class EnvToolWrapper:
    """Base of the classes `environment_class` makes: one episode of ``self.env`` at a time.

    Attributes:
        env: the wrapped `ToolEnv`.
        calls: this episode's ``(ToolCall, ToolResult)`` pairs, in order.
        done: whether the environment said the episode is over.
    """

    env: ToolEnv
    max_turns: int

    def __init__(self, env: ToolEnv) -> None:
        self.env = env
        self.calls: list[tuple[ToolCall, Any]] = []
        self.done = False

    def reset(self, task_id: str = "", seed: int = 0, **row: Any) -> None:
        """Start the episode of the row's task (``task_id``, ``seed``); the prompt already holds
        its text, so nothing is appended (None)."""
        self.env.reset(Task(str(task_id), int(seed)))
        self.calls, self.done = [], False
        return None

    def get_reward(self) -> float:
        """The environment's outcome (1.0: the task was solved)."""
        return float(self.env.outcome())

    def _call(self, tool: str, arguments: dict[str, str]) -> str:
        call = ToolCall(tool, {k: str(v) for k, v in arguments.items()})
        if self.done or len(self.calls) >= self.max_turns:
            # TRL stops only when a turn holds no call; the grammar forbids one here, so this is a
            # parse TRL made of something else: no step, as the compact rollout would end the episode
            raise RuntimeError("the episode is over")
        result = self.env.step(call)
        self.calls.append((call, result))
        self.done = bool(result.done)
        return str(result.text)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """This episode's calls as `trl_rollout.episode_messages` writes them (errors flagged
        ``"error": True``, signals under ``signals``): what `RlvpReward` reads."""
        from rlvp_dsl.events import Episode

        events = [result.event(k, call) for k, (call, result) in enumerate(self.calls)]
        return episode_messages(Episode("episode", tuple(events)))


def _tool_method(spec: Any) -> Callable[..., str]:
    params = list(spec.params or ())

    def tool(self: EnvToolWrapper, **arguments: str) -> str:
        return self._call(spec.name, arguments)

    tool.__name__ = tool.__qualname__ = spec.name
    tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY, annotation=str) for p in params],
        return_annotation=str,
    )
    tool.__annotations__ = {**{p: str for p in params}, "return": str}
    values = {p: ", ".join(spec.values_for(p)) for p in params}
    args = "".join(f"\n    {p}: one of {values[p]}." for p in params)
    tool.__doc__ = f"Call the tool {spec.name} (tags: {', '.join(sorted(spec.tags))}).\n\nArgs:{args}\n"
    return tool


def environment_class(env_factory: Callable[[], ToolEnv], max_turns: int) -> type[EnvToolWrapper]:
    """A class for TRL's ``environment_factory``: `EnvToolWrapper` with one method per tool of
    ``env_factory()``'s schema (keyword arguments typed ``str``, the closed value set in the
    docstring).  Instances wrap a fresh environment each.

    Raises:
        ValueError: a tool whose name is not an identifier or clashes with the wrapper's own
            attributes (``reset``, ``get_reward``, ``messages``, ...).  TRL lists the class's
            functions as tools: `EnvToolWrapper.messages` is a property so it is none.
    """
    schema = env_factory().schema()
    methods: dict[str, Any] = {}
    for spec in schema:
        if not spec.name.isidentifier() or hasattr(EnvToolWrapper, spec.name):
            raise ValueError(f"tool {spec.name!r} cannot be a method of the TRL environment class")
        methods[spec.name] = _tool_method(spec)
    cls = type("ChainEnv", (EnvToolWrapper,), {**methods, "max_turns": int(max_turns)})

    def init(self: EnvToolWrapper) -> None:
        EnvToolWrapper.__init__(self, env_factory())

    cls.__init__ = init  # type: ignore[misc]
    return cls


# ----------------------------------------------------------------------------
# the call grammar on model.generate
# ----------------------------------------------------------------------------
class CallGrammar:
    """The call mask as a stateless HF ``LogitsProcessor``: each row's turn is the ids after its
    last ``<|assistant|>`` token, walked through the trie of every marked JSON call; a complete
    call allows only EOS.  At the start of a turn after ``max_turns`` tool messages, or after a
    tool message holding one of `done_ids`, only EOS is allowed (the episode is over).
    `allowed_rows` gives the same mask for the training forward (`GrammarLogprobsMixin`).
    """

    def __init__(
        self, trie: CallTrie, assistant_id: int, tool_id: int, max_turns: int, done_ids: Sequence[int] = ()
    ) -> None:
        self.trie, self.assistant_id, self.tool_id = trie, assistant_id, tool_id
        self.max_turns, self.done_ids = int(max_turns), frozenset(done_ids)

    def _scan(self, ids: Sequence[int], record_from: int) -> tuple[list[tuple[int, ...] | None], Any]:
        """Walk `ids`; the allowed ids before each position >= `record_from` (None: unconstrained),
        and the allowed ids after the last one."""
        eos, root = self.trie.eos_id, self.trie.root
        node: Any = None
        at_start, tools, last_done = False, 0, False
        out: list[tuple[int, ...] | None] = []

        def allowed() -> tuple[int, ...] | None:
            if node is None:
                return None
            if at_start and (tools >= self.max_turns or last_done):
                return (eos,)
            kids = tuple(node.children)
            return kids + (eos,) if node.call is not None else kids

        for pos, tok in enumerate(ids):
            if pos >= record_from:
                out.append(allowed())
            if tok == self.assistant_id:
                node, at_start = root, True
                continue
            at_start = False
            if tok == self.tool_id:
                node, tools, last_done = None, tools + 1, False
            elif node is not None:
                node = None if tok == eos else node.children.get(tok)
            elif tools and tok in self.done_ids:
                last_done = True
        return out, allowed()

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        mask = torch.zeros_like(scores, dtype=torch.bool)
        for row, ids in enumerate(input_ids.tolist()):
            _, allowed = self._scan(ids, len(ids))
            if allowed is None:
                mask[row] = True
            else:
                mask[row, list(allowed)] = True
        return scores.masked_fill(~mask, float("-inf"))

    def allowed_rows(self, input_ids: Any, attention_mask: Any, completion_len: int) -> list[list[Any]]:
        """Per row, for each of its last `completion_len` positions: the ids the grammar allowed
        when that token was sampled (None: unconstrained -- tool output, padding).  Positions
        whose attention mask is 0 are skipped when walking the context."""
        B, L = input_ids.shape
        rows, keep = input_ids.tolist(), attention_mask.tolist()
        out = []
        for b in range(B):
            kept = [p for p in range(L) if keep[b][p]]
            first = L - completion_len
            ids = [rows[b][p] for p in kept]
            allowed, _ = self._scan(ids, 0)
            by_pos = dict(zip(kept, allowed))
            out.append([by_pos.get(p) for p in range(first, L)])
        return out


def constrain(model: Any, grammar: CallGrammar) -> None:
    """Make ``model.generate`` (the instance TRL calls) sample under `grammar`."""
    from transformers import LogitsProcessorList

    generate = model.generate

    def constrained(*args: Any, **kwargs: Any) -> Any:
        processors = LogitsProcessorList(kwargs.pop("logits_processor", None) or [])
        processors.append(grammar)
        return generate(*args, logits_processor=processors, **kwargs)

    model.generate = constrained


class GrammarLogprobsMixin:
    """In front of TRL's `GRPOTrainer`: per-token log-probs renormalised over the ids the
    `CallGrammar` at ``self.call_grammar`` allowed (the compact trainer's
    ``constrained_logprobs``; `trl_rollout.ConstrainedLogprobsMixin` for ``rollout_func``)."""

    call_grammar: CallGrammar

    def _get_per_token_logps_and_entropies(
        self,
        model: Any,
        input_ids: Any,
        attention_mask: Any,
        logits_to_keep: int,
        batch_size: Any = None,
        compute_entropy: bool = False,
        compute_aux_loss: bool = False,
        **kwargs: Any,
    ) -> Any:
        import torch

        T = logits_to_keep
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, -T - 1 : -1].float()
        logits = logits / self.temperature  # type: ignore[attr-defined]
        allow = torch.ones_like(logits, dtype=torch.bool)
        for b, row in enumerate(self.call_grammar.allowed_rows(input_ids, attention_mask, T)):
            for t, ids in enumerate(row):
                if ids is not None:
                    allow[b, t] = False
                    allow[b, t, list(ids)] = True
        return allowed_logprobs(logits, allow, input_ids[:, -T:], compute_entropy)


class EnvMessagesMixin:
    """In front of `RlvpReward`: each row's messages are its environment's record
    (`EnvToolWrapper.messages`, from TRL's ``environments`` keyword), with every failed call
    flagged and every call's signals, as `trl_rollout.EnvRollout` writes ``rlvp_messages``."""

    def __call__(self, prompts: Any, completions: Any, completion_ids: Any = None, **kwargs: Any) -> Any:
        envs = kwargs.get("environments")
        if envs is not None and "rlvp_messages" not in kwargs:
            kwargs["rlvp_messages"] = [e.messages for e in envs]
        return super().__call__(prompts, completions, completion_ids, **kwargs)  # type: ignore[misc]


# ----------------------------------------------------------------------------
# all of it for one environment
# ----------------------------------------------------------------------------
@attrs.define
class EnvFactorySetup:
    """What `build_env_factory` returns.

    Attributes:
        environment: the class to pass as ``environment_factory``.
        grammar: the `CallGrammar` for ``model.generate`` and the training forward.
        tool_tags: each tool's manifest tags (for `trl_rollout.EnvTagsMixin`).
        system: the system message (tools and the JSON call form).
        initial_signals: the environment's signals before any call.
    """

    environment: type[EnvToolWrapper]
    grammar: CallGrammar
    tool_tags: dict[str, frozenset[str]]
    system: str
    initial_signals: dict[str, Any]
    env_factory: Callable[[], ToolEnv]

    def dataset(self, tasks: Sequence[Task]) -> Any:
        """A `datasets.Dataset`: per task its ``prompt`` ([system, user task message with the
        initial signals]), ``task_id`` and ``seed`` (what `EnvToolWrapper.reset` reads)."""
        from datasets import Dataset

        env = self.env_factory()
        rows = []
        for task in tasks:
            text = f"{task.task_id} : {env.reset(task)}"
            prompt = [{"role": "system", "content": self.system}, task_message(text, self.initial_signals)]
            rows.append({"prompt": prompt, "task_id": task.task_id, "seed": task.seed})
        return Dataset.from_list(rows)


def build_env_factory(
    env_factory: Callable[[], ToolEnv], tokenizer: Any, max_turns: int, done_words: Sequence[str] = ("complete",)
) -> EnvFactorySetup:
    """The environment class, grammar, system message and tags for `env_factory` with `tokenizer`
    (a `tool_tokenizer`).  `done_words`: words of the tool output that ends an episode (chain-N's
    last answer is ``ok chain complete``); unknown words are ignored.

    Raises:
        ValueError: a call the tokenizer cannot write (`CallTrie.build`), or a marker or role
            token missing from its vocabulary.
    """
    env = env_factory()
    base = CallTrie.build(env.schema(), tokenizer, CALL_STYLE)
    open_, close = CALL_MARKERS
    texts = [f"{open_} {t} {close}" for t in base.texts]
    ids = [encode(tokenizer, t) for t in texts]
    unk = tokenizer.unk_token_id
    for text, seq in zip(texts, ids, strict=True):
        if unk in seq or tokenizer.decode(seq) != text:
            raise ValueError(f"marked call {text!r} is not a token sequence of this tokenizer")
    trie = CallTrie(list(base.calls), texts, ids, base.eos_id)
    role = {name: tokenizer.convert_tokens_to_ids(name) for name in ("<|assistant|>", "<|tool|>")}
    if unk in role.values():
        raise ValueError("the tokenizer has no <|assistant|> / <|tool|> tokens (use the tiny tokenizer)")
    done = [i for w in done_words for i in encode(tokenizer, w) if i != unk]
    initial = getattr(env, "initial_signals", None)
    return EnvFactorySetup(
        environment=environment_class(env_factory, max_turns),
        grammar=CallGrammar(trie, role["<|assistant|>"], role["<|tool|>"], max_turns, done),
        tool_tags=tool_tags(env),
        system=system_prompt(env, CALL_STYLE),
        initial_signals=dict(initial()) if initial is not None else {},
        env_factory=env_factory,
    )


def build_env_factory_trainer(cfg: Any, *, steps: int, out_dir: str, threads: int | None = None) -> tuple[Any, Any]:
    """TRL's own multi-turn loop on `cfg` (`trainer.config.TrainConfig`, ``model = "tiny"``):
    `RlvpGRPOTrainer` with `GrammarLogprobsMixin`, ``environment_factory`` = `build_env_factory`'s
    class on ``cfg.env``, the tiny policy of `trl_runs.tiny_policy` with `tool_tokenizer`'s
    template, rewards = the environment's outcome (``get_reward``, column ``ChainEnv``) + rlvp
    token credit (`RlvpReward` on ``cfg.rules`` behind `EnvMessagesMixin` and `EnvTagsMixin`),
    the batch and optimiser of `trl_runs.grpo_config`, at most ``max_turns`` tool rounds, and the
    `CallGrammar` on ``model.generate``.  Returns ``(trainer, EnvFactorySetup)``.

    Raises:
        ValueError: a config `trl_runs.tiny_policy` / `trl_runs.grpo_config` refuses.
        RuleError: the rule file has errors.
    """
    import torch
    from transformers.trainer_callback import PrinterCallback

    from rlvp_dsl.integrations.trl import RlvpGRPOTrainer, RlvpReward
    from trainer import envs
    from trainer.experiments.trl_rollout import EnvTagsMixin
    from trainer.experiments.trl_runs import grpo_config, process_schedule, tiny_policy

    torch.set_num_threads(int(threads or cfg.threads))
    factory = envs.env_factory(cfg.env, **cfg.env_args)
    model, tok = tiny_policy(cfg, factory)
    tool_tokenizer(tok)
    max_turns = int(cfg.max_turns or factory().max_turns)
    setup = build_env_factory(factory, tok, max_turns=max_turns)
    tasks = envs.make_tasks(steps * cfg.tasks_per_iteration, cfg.seed, prefix=f"{cfg.env}-")

    class EnvRlvpReward(EnvMessagesMixin, EnvTagsMixin, RlvpReward):
        pass

    reward = EnvRlvpReward(
        cfg.rules, mode="token", process_weight=cfg.process_weight, call_markers=CALL_MARKERS, tool_tags=setup.tool_tags
    )
    cls = type("GrammarRlvpGRPOTrainer", (GrammarLogprobsMixin, RlvpGRPOTrainer), {})
    args = grpo_config(
        cfg, steps=steps, out_dir=out_dir, max_completion_length=1024, max_tool_calling_iterations=max_turns
    )
    trainer = cls(
        model=model,
        reward_funcs=[reward],
        args=args,
        train_dataset=setup.dataset(tasks),
        processing_class=tok,
        environment_factory=setup.environment,
        process_schedule=process_schedule(cfg),
    )
    trainer.call_grammar = setup.grammar
    constrain(trainer.model, setup.grammar)
    trainer.remove_callback(PrinterCallback)
    return trainer, setup
