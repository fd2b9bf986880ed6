"""Training configuration: one dataclass, one docstring per field, loaded from TOML.

A config file may be flat or grouped in tables (``[model]``, ``[env]``, ...); the
tables are only for readability and are flattened, except ``env_args``,
``model_args`` and ``gen_args``, which are passed through as dicts.  Unknown keys are errors that
name the file and the key (with a did-you-mean); so are unknown settings in ``gen_args`` and
``model_args``, whose values are checked too (`trainer.config_args`; ``env_args`` is checked by
the environment, `trainer.envs.checked_knobs`).

Types are strict, as TOML writes them: a boolean field takes only ``true`` / ``false``
(``anneal = "no"`` is an error, not "yes"), a whole-number field only an integer, a
number field an integer or a float, a string field a string, ``lora_target_modules``
an array of strings (a bare string is not split into letters), the ``*_args`` fields
a table.  Every error names the file, the line where the key is set (when it can be
found), the key, what was expected and what was given.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvp_dsl.input_files import read_input_bytes
from rlvp_dsl.source import undecodable
from trainer.config_args import gen_args_problem, model_args_problem
from trainer.config_text import setting_line, type_error

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    import tomli as tomllib

LOSS_TYPES = ("token_mean", "seq_mean", "constant")
SCALE_REWARDS = ("group", "batch", "none")
PROCESS_NORMS = ("none", "group_rms")
DTYPES = ("float32", "bfloat16")


#: The seeds a run takes (config ``seed``, ``--seed``, each of ``--seeds``): whole numbers that torch,
#: Python's ``random`` and NumPy all accept.
SEED_MIN, SEED_MAX = 0, 2**32 - 1


def seed_problem(value: int) -> str | None:
    """What is wrong with a seed, or None: the one check behind the config's ``seed``,
    ``--seed`` and ``--seeds`` (``must be at least 0 (got -1)``)."""
    if value < SEED_MIN:
        return f"must be at least {SEED_MIN} (got {value})"
    if value > SEED_MAX:
        return f"must be at most {SEED_MAX} (got {value})"
    return None


class ConfigError(ValueError):
    """A config file or field is wrong; the message names the file and field.

    ``key`` is the field at fault (None for a file-level error); ``detail`` is the
    message without its location prefix.
    """

    def __init__(self, message: str, key: str | None = None, detail: str | None = None):
        super().__init__(message)
        self.key = key
        self.detail = detail or message


class ConfigReadError(ConfigError):
    """The config file cannot be read at all (missing, a folder, unreadable, not UTF-8 text): an
    I/O error, not an error in its settings (``rlvp-train`` exits 2, as ``rlvp-compile`` does for a
    rule file it cannot read)."""


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
    """Environment name (`trainer.envs.make_env`): chainN (chain4, chain6), gated / gatedN, or bfcl (BFCL v4
    multi-turn conversations; needs bfcl-eval, see examples/bfcl.toml)."""
    env_args: dict = field(default_factory=dict)
    """Environment knobs (`ChainConfig` / `GatedConfig` fields, e.g. ``{num_distractors = 2}``; for bfcl the
    `BfclConfig` fields, whose table is in trainer/envs/bfcl/env.py: ``category`` (multi_turn_base),
    ``task_ids``, ``max_gt_calls_per_turn``, ``max_user_turns``, ``max_calls_per_turn`` (8), ``max_turns`` (40),
    ``tools`` (classes | path), ``max_values``, ``max_tool_calls``, ``playable_only``, ``returned_values``, ``system_prompt`` (rlvp | bfcl))."""
    rules: str = "rules/chain.rlvp"
    """Hand-written rule file for the process credit (a relative path: the current folder, the config file's folder, then
    the repository root)."""
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
    """Further `trainer.sampling.generation.GenConfig` fields: ``call_style`` (plain | json),
    ``think_max_tokens``, ``think_token_ids``, ``system_prompt`` (``temperature``, ``max_turns`` and
    ``max_new_tokens`` are top-level settings)."""
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
    """Group normalisation of process credit: ``none`` or ``group_rms`` (divide by ``max(1, the group's RMS
    episode credit)``: it shrinks large credit, never enlarges small credit past ``w * |c|``)."""

    # --- annealing ---
    anneal: bool = False
    """Anneal the process weight once compliance saturates (method rlvp_noanneal forces False).  Off by
    default: annealing to 0 can collapse a solved policy for good (docs/trainer.md, "Annealing")."""
    anneal_threshold: float = 0.1
    """Compliance is saturated when violations per episode stay at or below this ..."""
    anneal_patience: int = 3
    """... for this many consecutive iterations."""
    anneal_start: int | None = None
    """Start decaying at this iteration at the latest (None: only on saturation)."""
    anneal_iterations: int = 10
    """Iterations over which the weight decays linearly to its floor."""
    anneal_floor: float = 0.0
    """The fraction of ``process_weight`` the decay stops at (0 to 1; 0: decay to zero).  A floor keeps
    an all-failed batch's gradient alive; on chain-4, 0.25 still collapsed 1 of 16 seeds
    (docs/results.md, "The README's main job")."""

    # --- dynamic sampling (dapo) ---
    dapo_max_rounds: int = 3
    """Cap on generation rounds per iteration; episodes of every round are counted (trainer/dapo.py)."""

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
    checkpoint_every: int = 10
    """Save ``checkpoint.pt`` every k iterations, and always at the end and on Ctrl-C (0: only then)."""
    log_every: int = 5
    """Off a terminal (CI, nohup, a pipe), print one progress line every k iterations, and at least
    one a minute; on a terminal a progress bar is shown instead."""
    tensorboard: bool = False
    """Also write TensorBoard events (only if tensorboard is installed)."""
    success_threshold: float = 0.5
    """Success level for "episodes to X % success" in summaries."""
    success_window: int = 3
    """Trailing window (iterations) of the success rate used for that threshold."""
    threads: int = 1
    """torch threads (the machine is shared)."""
    token_page_every: int = 20
    """Write ``out_dir/token_pages/iter_NNNN.html`` (tokens coloured by their advantage) every k iterations
    and at the last one (0: never); see trainer/token_page.py."""
    token_page_rollouts: int = 4
    """Rollouts of the batch shown on a token page."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self, where: str = "config") -> None:
        """Raise ConfigError naming the field when a value is out of range."""
        from trainer.methods import METHODS

        def bad(name: str, expect: str) -> None:
            detail = f"'{name}' must be {expect} (got {getattr(self, name)!r})"
            raise ConfigError(f"{where}: {detail}", key=name, detail=detail)

        for f in dataclasses.fields(self):
            detail = type_error(f.name, getattr(self, f.name), str(f.type))
            if detail:
                raise ConfigError(f"{where}: {detail}", key=f.name, detail=detail)
        for f in dataclasses.fields(self):  # inf passes `> 0` and NaN passes `< 0`: neither is a setting
            value = getattr(self, f.name)
            if str(f.type).startswith("float") and value is not None and not math.isfinite(value):
                bad(f.name, "a finite number")
        if (problem := seed_problem(self.seed)) is not None:
            detail = f"'seed' {problem}"
            raise ConfigError(f"{where}: {detail}", key="seed", detail=detail)
        if not self.out_dir.strip():
            bad("out_dir", "a folder name, not empty")
        for name, choices in (
            ("method", tuple(METHODS)),
            ("loss_type", LOSS_TYPES),
            ("scale_rewards", SCALE_REWARDS),
            ("process_norm", PROCESS_NORMS),
            ("dtype", DTYPES),
        ):
            value = getattr(self, name)
            if value not in choices:
                hint = difflib.get_close_matches(value, choices, n=1)
                detail = f"'{name}' must be one of {', '.join(choices)} (got {value!r})" + (
                    f"; did you mean {hint[0]!r}?" if hint else ""
                )
                raise ConfigError(f"{where}: {detail}", key=name, detail=detail)
        if self.device != "cpu":
            _check_device(self.device, where)
        for name in ("max_turns", "max_new_tokens"):
            if getattr(self, name) is not None and (
                not isinstance(getattr(self, name), int) or getattr(self, name) < 1
            ):
                bad(name, "a positive integer or absent")
        for name in (
            "iterations",
            "tasks_per_iteration",
            "num_generations",
            "dapo_max_rounds",
            "updates_per_batch",
            "micro_batch",
            "anneal_patience",
            "lora_rank",
            "success_window",
            "threads",
        ):
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
        for name in ("anneal_iterations", "checkpoint_every", "log_every", "micro_batch_tokens"):
            if getattr(self, name) < 0:
                bad(name, "a non-negative integer")
        if not self.lora_alpha > 0:  # alpha 0 scales the adapter to nothing: a run that never learns
            bad("lora_alpha", "positive")
        if not 0 <= self.lora_dropout < 1:
            bad("lora_dropout", "a probability in [0, 1)")
        if not self.kl_clip > 0:
            bad("kl_clip", "positive")
        if self.epsilon_high is not None and self.epsilon_high < 0:
            bad("epsilon_high", "non-negative or absent")
        if self.anneal_start is not None and self.anneal_start < 0:
            bad("anneal_start", "a non-negative integer or absent")
        if not 0 <= self.anneal_floor <= 1:
            bad("anneal_floor", "a fraction of process_weight in [0, 1]")
        if not 0 <= self.success_threshold <= 1:
            bad("success_threshold", "a success rate in [0, 1]")
        if not self.lora_target_modules:
            bad("lora_target_modules", "a non-empty array of module names")
        if self.token_page_every < 0:
            bad("token_page_every", "a non-negative integer (0: no token pages)")
        if self.token_page_rollouts < 1:
            bad("token_page_rollouts", "a positive integer")
        for problem in (gen_args_problem(self.gen_args), model_args_problem(self.model, self.model_args)):
            if problem is not None:  # the setting inside the table: `gen_args.call_style`
                raise ConfigError(f"{where}: {problem.detail}", key=problem.key, detail=problem.detail)

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
        detail = f"'device' must be cpu, cuda or cuda:N (got {device!r})"
        raise ConfigError(f"{where}: {detail}", key="device", detail=detail)
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if int(device.partition(":")[2] or 0) >= count:
        seen = f"{count} CUDA device(s)" if count else "no CUDA device"
        detail = (
            f"'device' must be a CUDA device torch can use (got {device!r}; "
            f'torch {torch.__version__} sees {seen}); set device = "cpu"'
        )
        raise ConfigError(f"{where}: {detail}", key="device", detail=detail)


_DICT_FIELDS = ("env_args", "model_args", "gen_args")
#: The table names the shipped configs and docs use (any other name is allowed: tables are only
#: for readability), so a near miss of one (``[modle]``) is caught as the typo it is.
KNOWN_TABLES = (
    "run",
    "model",
    "env",
    "environment",
    "rules",
    "rollout",
    "advantage",
    "anneal",
    "annealing",
    "dapo",
    "loss",
    "optimiser",
    "optimizer",
    "bookkeeping",
)


def _flatten(data: dict[str, Any], where: str, table: str = "", seen: dict[str, str] | None = None) -> dict[str, Any]:
    """The settings of `data` in one flat dict (tables other than `_DICT_FIELDS` are for
    readability only); `where` names the file, `table` the table being read (``[loss]``, "" at the
    top level).  ConfigError (`key` set) for an unknown table or key, or a key set twice."""
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    seen = {} if seen is None else seen
    flat: dict[str, Any] = {}
    inside = f" in [{table}]" if table else ""
    for key, value in data.items():
        if isinstance(value, dict) and key not in _DICT_FIELDS:
            near = difflib.get_close_matches(key, KNOWN_TABLES, n=1, cutoff=0.75)
            if near and key not in KNOWN_TABLES and key not in names:
                raise ConfigError(f"{where}: unknown table '[{key}]'; did you mean '[{near[0]}]'?", key=key)
            flat.update(_flatten(value, where, f"{table}.{key}" if table else key, seen))
            continue
        if key not in names:
            hint = difflib.get_close_matches(key, sorted(names), n=1)
            raise ConfigError(
                f"{where}: unknown key '{key}'{inside}" + (f"; did you mean '{hint[0]}'?" if hint else ""), key=key
            )
        if key in seen:
            first, second = (f"[{t}]" if t else "the top level" for t in (seen[key], table))
            raise ConfigError(f"{where}: '{key}' is set twice, in {first} and in {second}; keep one", key=key)
        seen[key] = table
        flat[key] = value
    return flat


def load_config(path: str | os.PathLike, **overrides: Any) -> TrainConfig:
    """Read a TOML config; ``overrides`` (non-None values) win over the file.

    Raises:
        ConfigReadError: (a ConfigError) the file is missing, a folder, unreadable or not UTF-8.
        ConfigError: TOML syntax error, unknown key (in the file or in `overrides`), a value of the
            wrong type or out of range (the message names file, line, key, expected and got).
    """
    path = Path(path)
    try:
        text = read_input_bytes(path, stdin=False).decode("utf-8")  # a device or FIFO is refused, not read forever
        data = tomllib.loads(text)
    except FileNotFoundError:
        raise ConfigReadError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise ConfigReadError(f"{path}: is a folder, not a config file") from None
    except tomllib.TOMLDecodeError as exc:  # "Expected ... (at line 46, column 23)" -> file:46:23: Expected ...
        where = re.search(r"\s*\(at line (\d+), column (\d+)\)$", str(exc))
        if where is None:
            raise ConfigError(f"{path}: {exc}") from None
        problem, row, col = str(exc)[: where.start()], int(where[1]), int(where[2])
        lines = text.splitlines()
        if problem == "Invalid value" and row <= len(lines) and lines[row - 1][col - 1 : col].isalpha():
            problem += ' (text is written in double quotes, method = "rlvp"; numbers and true/false are not)'
        raise ConfigError(f"{path}:{row}:{col}: {problem}") from None
    except UnicodeDecodeError as exc:
        raise ConfigReadError(f"{path}: not UTF-8 text: {undecodable(exc)}: a config is a TOML file") from None
    except OSError as exc:
        raise ConfigReadError(f"{path}: cannot read the config: {exc.strerror or exc}") from None
    if not data:
        raise ConfigError(
            f'{path}: the config is empty: expected TOML settings such as method = "rlvp" (see examples/chain4.toml)'
        )

    def at(key: str | None) -> str:
        line = setting_line(text, key) if key else None
        return f"{path}:{line}" if line else str(path)

    try:
        flat = _flatten(data, str(path))
    except ConfigError as exc:
        raise ConfigError(exc.detail.replace(str(path), at(exc.key), 1), key=exc.key) from None
    types = {f.name: str(f.type) for f in dataclasses.fields(TrainConfig)}
    given = {k: v for k, v in overrides.items() if v is not None}
    for key in given:
        if key not in types:  # a caller's typo: said as the file's unknown keys are
            close = difflib.get_close_matches(key, list(types), n=1)
            raise ConfigError(
                f"load_config: unknown setting {key!r}" + (f"; did you mean {close[0]!r}?" if close else ""), key=key
            )

    def build(values: dict[str, Any], blame, overridden: dict[str, Any]) -> TrainConfig:
        for key, value in values.items():
            detail = type_error(key, value, types[key])
            if detail:  # an override's type is the caller's (the command line's flags are typed by click)
                where = "load_config" if key in overridden else blame(key)
                raise ConfigError(f"{where}: {detail}", key=key, detail=detail)
            if types[key].startswith("float") and isinstance(value, int):
                values[key] = float(value)
        try:
            return TrainConfig(**values)
        except ConfigError as exc:
            raise ConfigError(f"{blame(exc.key)}: {exc.detail}", key=exc.key, detail=exc.detail) from None

    # The file's own values first: a wrong one is reported even where a flag overrides it.
    build(dict(flat), at, {})
    flat.update(given)
    for key in ("rules", "auto_rules"):
        value = flat.get(key)
        if value and not os.path.isabs(value) and not (Path.cwd() / value).exists() and (path.parent / value).exists():
            flat[key] = str(path.parent / value)
    flags = {"out_dir": "--out"}
    return build(flat, lambda key: flags.get(key, f"--{key}") if key in given else at(key), given)
