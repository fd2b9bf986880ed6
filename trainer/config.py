"""Training configuration: one dataclass, one docstring per field, loaded from TOML.

A config file may be flat or grouped in tables (``[model]``, ``[env]``, ...); the
tables are only for readability and are flattened, except ``env_args``,
``model_args`` and ``gen_args``, which are passed through as dicts.  Unknown keys are errors that
name the file and the key (with a did-you-mean).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    import tomli as tomllib

LOSS_TYPES = ("token_mean", "seq_mean", "constant")
SCALE_REWARDS = ("group", "batch", "none")
PROCESS_NORMS = ("none", "group_rms")
DTYPES = ("float32", "bfloat16")


class ConfigError(ValueError):
    """A config file or field is wrong; the message names the file and field."""


@dataclass
class TrainConfig:
    """Everything one training run needs.  Defaults are the chain-4 tiny-model run."""

    # --- run ---
    method: str = "rlvp"
    """Training method: grpo | dapo | scalar_fold | rlvp | rlvp_auto | rlvp_noanneal (see trainer/methods.py)."""
    seed: int = 0
    """Seed of everything: model init, task order, sampling."""
    iterations: int = 40
    """Number of GRPO iterations (rollout batch + update)."""
    out_dir: str = "runs/chain4"
    """Where metrics.jsonl, checkpoints and plots go (a sub-folder per method/seed under --compare)."""

    # --- environment and rules ---
    env: str = "chain4"
    """Environment name (`trainer.envs.make_env`): chainN (chain4, chain6) or gated / gatedN."""
    env_args: dict = field(default_factory=dict)
    """Environment knobs (`ChainConfig` / `GatedConfig` fields, e.g. ``{num_distractors = 2}``)."""
    rules: str = "rules/chain.rlvp"
    """Hand-written rule file for the process credit (relative paths: to the repository root, then the config file)."""
    auto_rules: str = "examples/rules/chain4_auto.rlvp"
    """Auto-derived rule file (``rlvp-compile --auto-from-tags``), used by method rlvp_auto."""

    # --- model ---
    model: str = "tiny"
    """``tiny`` (built in code, no download), ``smollm2`` (SmolLM2-135M-Instruct GGUF), or a local checkpoint path."""
    model_args: dict = field(default_factory=dict)
    """Keyword arguments of the model builder (tiny: hidden size, layers, ...)."""
    lora_rank: int = 8
    """LoRA rank r."""
    lora_alpha: float = 16.0
    """LoRA scaling alpha (update scaled by alpha / r)."""
    lora_dropout: float = 0.0
    """LoRA dropout (0 keeps the update deterministic)."""
    lora_target_modules: list = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    """Linear layers that get an adapter (Llama names; add gate_proj, up_proj, down_proj for the MLP)."""
    device: str = "cpu"
    """Where the policy, its adapter and the batch tensors live: ``cpu``, ``cuda`` or ``cuda:N`` (metrics
    come back to the CPU).  A CUDA device that torch cannot see is a config error."""
    dtype: str = "float32"
    """Dtype of the base model's weights: ``float32`` or ``bfloat16``.  The LoRA adapter stays float32 (peft
    upcasts it), and log-probs, advantages and the loss are computed in float32."""

    # --- rollout ---
    tasks_per_iteration: int = 4
    """Groups per iteration (distinct tasks); the batch is tasks_per_iteration * num_generations episodes."""
    num_generations: int = 8
    """Rollouts per task (the group size G)."""
    temperature: float = 1.0
    """Sampling temperature."""
    max_turns: int | None = None
    """Maximum tool calls per episode (None: the environment's own ``max_turns``)."""
    max_new_tokens: int | None = None
    """Maximum generated tokens per turn (None: just enough for the longest call)."""
    gen_args: dict = field(default_factory=dict)
    """Further `trainer.generation.GenConfig` fields (``call_style``, ``think_max_tokens``, ...)."""
    constrained_logprobs: bool = True
    """Train the policy that sampled: log-probs renormalised over the ids the call mask allowed
    (tokens with a single allowed id then carry no gradient).  False: full-vocabulary softmax."""

    # --- advantage ---
    scale_rewards: str = "group"
    """Divide centred rewards by the group std (``group``, GRPO), the batch std (``batch``) or not at all (``none``)."""
    adv_eps: float = 1e-4
    """eps in (R - mean_g) / (std + eps)."""
    process_weight: float = 1.0
    """Weight of the process credit before annealing (multiplies the token-attached or folded credit)."""
    process_norm: str = "none"
    """Group normalisation of process credit: ``none`` or ``group_rms`` (divide by the group's RMS episode credit)."""

    # --- annealing ---
    anneal: bool = True
    """Anneal the process weight once compliance saturates (method rlvp_noanneal forces False)."""
    anneal_threshold: float = 0.1
    """Compliance is saturated when violations per episode stay at or below this ..."""
    anneal_patience: int = 3
    """... for this many consecutive iterations."""
    anneal_start: int | None = None
    """Start decaying at this iteration at the latest (None: only on saturation)."""
    anneal_iterations: int = 10
    """Iterations over which the weight decays linearly to zero."""

    # --- dynamic sampling (dapo) ---
    dapo_max_rounds: int = 3
    """Cap on generation rounds per iteration; episodes of every round are counted."""

    # --- loss and optimiser ---
    loss_type: str = "token_mean"
    """Loss aggregation: ``token_mean`` (DAPO), ``seq_mean`` (GRPO paper), ``constant`` (Dr. GRPO); see trainer/loss.py."""
    epsilon: float = 0.2
    """Lower clip range of the ratio (1 - epsilon)."""
    epsilon_high: float | None = None
    """Upper clip range (1 + epsilon_high); None: same as epsilon."""
    beta: float = 0.0
    """KL coefficient to the reference (the base model, adapter disabled); 0 skips the reference pass."""
    kl_clip: float = 10.0
    """Log-ratio above which the k3 KL continues linearly (keeps it finite)."""
    learning_rate: float = 5e-3
    """AdamW learning rate of the LoRA parameters."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm (0: none)."""
    updates_per_batch: int = 1
    """Optimiser passes over each rollout batch (TRL's num_iterations); >1 makes the ratio clip active."""
    micro_batch: int = 16
    """Episodes per forward pass (gradient accumulation over micro-batches)."""
    micro_batch_tokens: int = 0
    """Cap on the padded tokens (episodes x longest episode) of one forward pass, which bounds its
    activation memory; 0: none.  With a cap, episodes are grouped longest first (less padding),
    at most ``micro_batch`` per pass; the gradient is the same (the batch's normaliser)."""

    # --- bookkeeping ---
    checkpoint_every: int = 0
    """Save a checkpoint every k iterations (0: only at the end)."""
    tensorboard: bool = False
    """Also write TensorBoard events (only if tensorboard is installed)."""
    success_threshold: float = 0.5
    """Success level for "episodes to X % success" in summaries."""
    success_window: int = 3
    """Trailing window (iterations) of the success rate used for that threshold."""
    threads: int = 1
    """torch threads (the machine is shared)."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self, where: str = "config") -> None:
        """Raise ConfigError naming the field when a value is out of range."""
        from trainer.methods import METHODS

        def bad(name: str, expect: str) -> None:
            raise ConfigError(f"{where}: '{name}' must be {expect} (got {getattr(self, name)!r})")

        if self.method not in METHODS:
            bad("method", "one of " + ", ".join(METHODS))
        if self.loss_type not in LOSS_TYPES:
            bad("loss_type", "one of " + ", ".join(LOSS_TYPES))
        if self.scale_rewards not in SCALE_REWARDS:
            bad("scale_rewards", "one of " + ", ".join(SCALE_REWARDS))
        if self.process_norm not in PROCESS_NORMS:
            bad("process_norm", "one of " + ", ".join(PROCESS_NORMS))
        if self.dtype not in DTYPES:
            bad("dtype", "one of " + ", ".join(DTYPES))
        if self.device != "cpu":
            _check_device(self.device, where)
        for name in ("max_turns", "max_new_tokens"):
            if getattr(self, name) is not None and (not isinstance(getattr(self, name), int) or getattr(self, name) < 1):
                bad(name, "a positive integer or absent")
        for name in ("iterations", "tasks_per_iteration", "num_generations",
                     "dapo_max_rounds", "updates_per_batch", "micro_batch", "anneal_patience", "lora_rank",
                     "success_window", "threads"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                bad(name, "a positive integer")
        if self.num_generations < 2:
            bad("num_generations", "at least 2 (a group needs two rollouts to have a baseline)")
        for name in ("learning_rate", "temperature", "adv_eps"):
            if not getattr(self, name) > 0:
                bad(name, "positive")
        for name in ("beta", "epsilon", "process_weight", "anneal_threshold", "weight_decay", "max_grad_norm"):
            if getattr(self, name) < 0:
                bad(name, "non-negative")
        if self.anneal_iterations < 0:
            bad("anneal_iterations", "non-negative")
        if isinstance(self.micro_batch_tokens, bool) or not isinstance(self.micro_batch_tokens, int) \
                or self.micro_batch_tokens < 0:
            bad("micro_batch_tokens", "a non-negative integer (0: no cap)")

    # ------------------------------------------------------------------
    def replace(self, **changes: Any) -> "TrainConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def resolve(self, path: str) -> str:
        """A rule/model path as given, else relative to the repository root."""
        if not path or os.path.isabs(path) or os.path.exists(path):
            return path
        root = Path(__file__).resolve().parent.parent
        cand = root / path
        return str(cand) if cand.exists() else path


def _check_device(device: Any, where: str) -> None:
    """Raise ConfigError unless ``device`` is ``cuda`` or ``cuda:N`` and torch can use it."""
    if not isinstance(device, str) or not re.fullmatch(r"cuda(:\d+)?", device):
        raise ConfigError(f"{where}: 'device' must be cpu, cuda or cuda:N (got {device!r})")
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if int(device.partition(":")[2] or 0) >= count:
        seen = f"{count} CUDA device(s)" if count else "no CUDA device"
        raise ConfigError(f"{where}: 'device' must be a CUDA device torch can use (got {device!r}; "
                          f"torch {torch.__version__} sees {seen}); set device = \"cpu\"")


_DICT_FIELDS = ("env_args", "model_args", "gen_args")


def _flatten(data: dict[str, Any], where: str) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and key not in _DICT_FIELDS:
            flat.update(_flatten(value, f"{where}[{key}]"))
            continue
        if key not in names:
            hint = difflib.get_close_matches(key, sorted(names), n=1)
            raise ConfigError(f"{where}: unknown key '{key}'" + (f"; did you mean '{hint[0]}'?" if hint else ""))
        flat[key] = value
    return flat


def load_config(path: str | os.PathLike, **overrides: Any) -> TrainConfig:
    """Read a TOML config; ``overrides`` (non-None values) win over the file.

    Raises:
        ConfigError: file missing or unreadable, TOML syntax error, unknown key, bad value.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}): a config is a TOML file") from None
    if not data:
        raise ConfigError(f"{path}: the config is empty: expected TOML settings such as method = \"rlvp\" "
                          "(see examples/chain4.toml)")
    flat = _flatten(data, str(path))
    flat.update({k: v for k, v in overrides.items() if v is not None})
    defaults = {f.name: f for f in dataclasses.fields(TrainConfig)}
    for key, value in flat.items():
        if key in _DICT_FIELDS and not isinstance(value, dict):
            raise ConfigError(f"{path}: '{key}' must be a table (got {value!r})")
        want = defaults[key].type
        if want in ("int", "float") and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ConfigError(f"{path}: '{key}' must be a number (got {value!r})")
        if want == "float" and isinstance(value, int):
            flat[key] = float(value)
    for key in ("rules", "auto_rules"):
        value = flat.get(key)
        if value and not os.path.isabs(value) and not (Path.cwd() / value).exists() and (path.parent / value).exists():
            flat[key] = str(path.parent / value)
    try:
        cfg = TrainConfig(**flat)
    except TypeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}".replace(": config:", ":")) from None
    return cfg
