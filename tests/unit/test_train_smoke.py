"""Two-iteration end-to-end runs on CPU with the real tiny model, env and rules (issue 3, case 7)."""

import json
from pathlib import Path

import pytest
import torch

from trainer.config import ConfigError, TrainConfig, load_config
from trainer.loop import train

from tolerance import assert_close, transformer_terms

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "chain4.toml"


def _small(tmp_path, **kw):
    cfg = load_config(CONFIG, out_dir=str(tmp_path), iterations=2)
    return cfg.replace(tasks_per_iteration=2, num_generations=4, **kw)


@pytest.mark.parametrize("method", ["rlvp", "dapo"])
def test_two_iterations_end_to_end(tmp_path, method):
    """Case 7: two iterations of the real pipeline finish in seconds and write metrics JSONL."""
    cfg = _small(tmp_path, method=method, dapo_max_rounds=2)
    rows = train(cfg, progress=False)
    assert [r["iteration"] for r in rows] == [0, 1]
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["iteration"] for x in lines] == [0, 1]
    assert rows[-1]["rollout/episodes_generated"] >= 16
    assert (tmp_path / "checkpoint.pt").exists()
    if method == "rlvp":
        assert rows[0]["process/weight"] == 1.0 and rows[0]["rollout/dead_iteration"] == 0


def test_resume_identical_with_real_model(tmp_path):
    """Checkpoint after 1 iteration + resume gives the same iteration 2 as an uninterrupted run."""
    full = train(_small(tmp_path / "a"), progress=False)
    cfg = _small(tmp_path / "b")
    train(cfg.replace(iterations=1), progress=False)
    resumed = train(cfg, resume=True, progress=False)
    strip = lambda r: {k: v for k, v in r.items() if not k.startswith("perf/")}
    assert strip(resumed[0]) == strip(full[1])


def _independent_kl(model, batch, temperature):
    """Token-mean k3 KL(policy || adapter-disabled base) over the batch's action tokens, one rollout
    at a time, without padding and without `trainer.logprobs` or `trainer.loss`."""

    def logprobs(r):
        seq = torch.tensor([r.prompt_ids + r.completion_ids])
        logits = model(input_ids=seq).logits[0].float() / temperature  # (L, V)
        out = []
        for t, (tok, m) in enumerate(zip(r.completion_ids, r.completion_mask, strict=True)):
            if not m:
                continue
            row = logits[len(r.prompt_ids) + t - 1]
            allowed = r.allowed_ids[t] if r.allowed_ids else None
            if allowed is not None:
                keep = torch.full_like(row, float("-inf"))
                keep[list(allowed)] = 0.0
                row = row + keep
            out.append(torch.log_softmax(row, -1)[tok])
        return torch.stack(out)

    total, n, slope, largest = 0.0, 0, 0.0, 0.0
    with torch.no_grad():
        for r in batch:
            lp = logprobs(r)
            with model.disable_adapter():
                ref = logprobs(r)
            d = ref - lp
            total += float((torch.exp(d) - d - 1).sum())
            slope += float((torch.exp(d) - 1).abs().sum())  # d k3 / d d: how a log-prob's error moves k3
            largest = max(largest, float(lp.abs().max()), float(ref.abs().max()))
            n += len(d)
    # what the error of the two log-probs (each ~ largest |log-prob|) and of the mean can move it by
    magnitude = 2 * largest * slope / n + total / n
    return total / n, magnitude


def test_kl_is_positive_and_matches_an_independent_computation(tmp_path):
    """With a non-zero adapter (LoRA B perturbed) the logged KL against the adapter-disabled base is > 0 and
    equals the k3 mean computed independently on the batch trained on."""
    from trainer.backend import build_backend

    cfg = _small(tmp_path, beta=0.05, iterations=1)
    be = build_backend(cfg)
    gen = torch.Generator().manual_seed(0)
    perturbed = 0
    with torch.no_grad():
        for name, p in be.model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
                perturbed += 1
    assert perturbed > 0
    expected, batches = [], []

    def independent(it, groups, credits, weight):
        batches.append(groups)
        expected.append(_independent_kl(be.model, [r for g in groups for r in g], cfg.temperature))

    rows = train(cfg, backend=be, progress=False, on_batch=independent)
    kl, magnitude = expected[0]
    assert kl > 1e-4  # the adapter moves the policy: KL is not trivially 0
    batch_len = max(len(r.prompt_ids) + len(r.completion_ids) for g in batches[0] for r in g)
    tokens = sum(sum(r.completion_mask) for g in batches[0] for r in g)
    # a padded batch through trainer.logprobs vs one unpadded rollout at a time (logged as a float32 value)
    assert_close(
        rows[0]["loss/kl"],
        kl,
        n=transformer_terms(be.model, batch_len, tokens),
        dtype=torch.float32,
        scale=magnitude,
        what="loss/kl",
    )


def test_config_errors_name_file_and_key(tmp_path):
    """Unknown keys and bad values name the file and the field."""
    bad = tmp_path / "bad.toml"
    bad.write_text('methd = "rlvp"\n')
    with pytest.raises(ConfigError, match=r"bad.toml:1: unknown key 'methd'; did you mean 'method'"):
        load_config(bad)
    bad.write_text("seed = = 0\n")  # a TOML syntax error: file:line:col like every other error
    with pytest.raises(ConfigError, match=r"bad.toml:1:8: Invalid value$"):
        load_config(bad)
    bad.write_text("seed = 0\nmethod = rlvp\n")  # a bare word: the value that needed quotes
    with pytest.raises(
        ConfigError, match=r'bad.toml:2:10: Invalid value \(text is written in double quotes, method = "rlvp"'
    ):
        load_config(bad)
    bad.write_text("[modle]\nlora_rank = 4\n")  # a near miss of a known table is a typo; other names are free
    with pytest.raises(ConfigError, match=r"unknown table '\[modle\]'; did you mean '\[model\]'"):
        load_config(bad)
    bad.write_text("[my_notes]\nlora_rank = 4\n")
    assert load_config(bad).lora_rank == 4
    bad.write_text('[loss]\nloss_type = "sum"\n')
    with pytest.raises(ConfigError, match="'loss_type' must be one of"):
        load_config(bad)
    with pytest.raises(ConfigError, match="'num_generations' must be at least 2"):
        TrainConfig(num_generations=1)


def test_cli_two_iterations(tmp_path, monkeypatch):
    """`rlvp-train CONFIG --method grpo --iterations 2` runs and reports; bad config exits 1.  Its main
    in-process (click's runner, standard output and error apart); tests/e2e runs it as a process."""
    from click.testing import CliRunner

    from trainer.cli.train_command import main

    monkeypatch.chdir(ROOT)
    out = CliRunner().invoke(main, [str(CONFIG), "--method", "grpo", "--iterations", "2", "--out", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert "grpo seed 0: 2 iterations" in out.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text("iterations = -3\n")
    out = CliRunner().invoke(main, [str(bad)])
    assert out.exit_code == 1 and "'iterations' must be a positive integer" in out.stderr
