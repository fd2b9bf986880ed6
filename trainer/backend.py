"""The backend of one run: the pieces the loop needs from the model and environment side.

`Backend` bundles the policy, rollout collection, the task sampler and the credit
source (the compiled rules); `build_backend(cfg)` builds the default one from a config (the
`trainer.model` policy with its LoRA adapter, `trainer.sampling.rollout.collect_groups` on the
configured environment, the method's rule file).  Tests pass their own `Backend`
to `trainer.loop.train` (a tiny fake model, hand-made rollouts).
"""

from __future__ import annotations

from typing import Any, Callable

import attrs
import torch

from trainer.config import ConfigError, TrainConfig
from trainer.config_args import token_ids_problem
from trainer.methods import get_method
from trainer.types import Rollout


@attrs.define
class Backend:
    """Model, rollout collection and rule scoring for one run.

    Attributes:
        model: the policy (a peft model: trainable LoRA, base frozen).
        collect: ``collect(task, num_generations, seed) -> list[Rollout]`` (one group).
        make_tasks: ``make_tasks(count, seed) -> list[Task]``.
        credit_source: compiled rules (``score(episode) -> list[Credit]``) or ``fn(episode) -> list[float]``.
        pad_id: padding token id.
        ref_context: context manager factory that disables the adapter (reference model).
        decode: ids -> one text per id, for the token pages (None: they show the ids).
        collect_groups: ``collect_groups(tasks, num_generations, seeds) -> list[list[Rollout]]``,
            all groups of a round at once (None: `collect` one group at a time); group j
            must be what ``collect(tasks[j], num_generations, seeds[j])`` gives.
    """

    model: torch.nn.Module
    collect: Callable[[Any, int, int], list[Rollout]]
    make_tasks: Callable[[int, int], list]
    credit_source: Any
    pad_id: int = 0
    ref_context: Callable[[], Any] | None = None
    decode: Callable[[Any], list[str]] | None = None
    collect_groups: Callable[[list, int, list[int]], list[list[Rollout]]] | None = None


def build_backend(cfg: TrainConfig) -> Backend:
    """The default backend: `trainer.model` policy, `trainer.sampling.rollout.collect_group`, rules from the config.

    Raises:
        ConfigError: (``key`` names the setting) a ``lora_target_modules`` that matches no module of
            the model, or ``gen_args.think_token_ids`` past its vocabulary: settings only the built
            model can check.
        RuleError: the method's rule file has errors.
        ValueError: an environment or model setting the environment or model builder refuses.
    """
    from rlvp_dsl import load_program
    from trainer import envs, model as model_mod
    from trainer.sampling import rollout
    from trainer.sampling.generation import GenConfig

    method = get_method(cfg.method)
    rules_path = cfg.resolve(getattr(cfg, method.rules_field))
    program = load_program(rules_path)
    factory = envs.env_factory(cfg.env, **cfg.env_args)
    # gen_args passed the config's checks (`trainer.config_args`): GenConfig takes them
    gen_cfg = GenConfig(
        temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens, max_turns=cfg.max_turns, **cfg.gen_args
    )
    torch.manual_seed(cfg.seed)  # LoRA init
    try:
        policy, tokenizer = model_mod.build_policy(cfg, factory)
    except model_mod.LoraTargetError as exc:
        raise ConfigError(f"config: {exc}", key="lora_target_modules", detail=str(exc)) from None
    policy.eval()
    vocab = policy.get_output_embeddings().weight.shape[0]
    if (problem := token_ids_problem(cfg.gen_args, vocab)) is not None:  # known once the model is
        raise ConfigError(f"config: {problem.detail}", key=problem.key, detail=problem.detail)

    def collect(task, n, seed):
        return rollout.collect_group(policy, tokenizer, factory, task, n, gen_cfg, seed)

    def collect_groups(tasks, n, seeds):
        return rollout.collect_groups(policy, tokenizer, factory, tasks, n, gen_cfg, seeds)

    return Backend(
        model=policy,
        collect=collect,
        make_tasks=lambda count, seed: envs.make_tasks(count, seed, prefix=f"{cfg.env}-"),
        credit_source=program,
        pad_id=int(getattr(tokenizer, "pad_token_id", 0) or 0),
        ref_context=getattr(policy, "disable_adapter", None),
        decode=lambda ids: [tokenizer.decode([i]) for i in ids],
        collect_groups=collect_groups,
    )
