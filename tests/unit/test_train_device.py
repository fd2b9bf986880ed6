"""The trainer's `device` and `dtype` settings: bf16 on CPU, a clear error for a CUDA device torch cannot see."""

import math
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from trainer.backend import build_backend
from trainer.cli.train_command import main
from trainer.config import ConfigError, TrainConfig, load_config
from trainer.loop import train

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "chain4.toml"
NO_CUDA = not torch.cuda.is_available()


def _tiny(tmp_path, **kw):
    cfg = load_config(CONFIG, out_dir=str(tmp_path), iterations=1)
    return cfg.replace(tasks_per_iteration=2, num_generations=4, **kw)


def test_bfloat16_base_trains_one_iteration_on_cpu(tmp_path):
    """dtype = bfloat16: the base weights are bf16, the adapter float32, and one iteration gives finite metrics."""
    cfg = _tiny(tmp_path, dtype="bfloat16")
    be = build_backend(cfg)
    dtypes = {("lora_" in n, p.dtype) for n, p in be.model.named_parameters()}
    assert dtypes == {(False, torch.bfloat16), (True, torch.float32)}
    rows = train(cfg, backend=be, progress=False)
    assert len(rows) == 1 and rows[0]["rollout/episodes_generated"] == 8
    assert all(math.isfinite(rows[0][k]) for k in ("loss/policy", "policy/entropy", "perf/tokens_per_s"))


@pytest.mark.skipif(NO_CUDA, reason="needs a CUDA device")
def test_one_iteration_on_cuda(tmp_path):  # pragma: no cover - GPU only
    """device = cuda: the policy lives on the GPU and the metrics come back as Python floats."""
    cfg = _tiny(tmp_path, device="cuda", dtype="bfloat16")
    be = build_backend(cfg)
    assert next(be.model.parameters()).device.type == "cuda"
    rows = train(cfg, backend=be, progress=False)
    assert isinstance(rows[0]["loss/policy"], float) and math.isfinite(rows[0]["loss/policy"])


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
def test_cuda_without_cuda_is_a_config_error(tmp_path):
    """device = cuda where torch sees no CUDA device: a ConfigError naming the file and field, exit 1, no traceback."""
    with pytest.raises(ConfigError, match=r"'device' must be a CUDA device torch can use \(got 'cuda'; .*no CUDA"):
        TrainConfig(device="cuda")
    bad = tmp_path / "gpu.toml"
    bad.write_text(CONFIG.read_text().replace('model = "tiny"', 'model = "tiny"\ndevice = "cuda:1"'))
    with pytest.raises(ConfigError, match=r"gpu.toml:\d+: 'device' must be a CUDA device torch can use \(got 'cuda:1'"):
        load_config(bad)
    done = CliRunner().invoke(main, [str(bad), "--iterations", "1", "--out", str(tmp_path / "out")])
    assert done.exit_code == 1 and "'device'" in done.output and "Traceback" not in done.output


def test_bad_device_and_dtype_names_are_config_errors():
    """Unknown device strings and dtypes name the field, what it must be, and what it got."""
    with pytest.raises(ConfigError, match=r"'device' must be cpu, cuda or cuda:N \(got 'gpu'\)"):
        TrainConfig(device="gpu")
    with pytest.raises(ConfigError, match=r"'dtype' must be one of float32, bfloat16 \(got 'float16'\)"):
        TrainConfig(dtype="float16")
