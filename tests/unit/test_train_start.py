"""A run that fails before its first iteration is logged leaves nothing that blocks the retry; a
resume whose metrics.jsonl lacks rows of the checkpoint's iterations is refused; a damaged
checkpoint's reason is cut at a word, never mid-sentence without saying so."""

from __future__ import annotations

import pytest
import torch

from trainer import checkpoint as ckpt
from trainer.config import TrainConfig
from trainer.loop import train
from trainer.run_folder import existing_outputs

from trainer_fakes import fake_backend

torch.set_num_threads(1)


def _cfg(out, **kw):
    base = dict(iterations=2, tasks_per_iteration=2, num_generations=2, out_dir=str(out), micro_batch=4)
    base.update(kw)
    return TrainConfig(**base)


def _failing(be, after: int):
    """`be` whose rollout raises after `after` successful groups (as a bad sampling setting would)."""
    calls = {"n": 0}
    collect = be.collect

    def broken(task, n, seed):
        calls["n"] += 1
        if calls["n"] > after:
            raise IndexError("index 100000 is out of bounds for dimension 0 with size 79")
        return collect(task, n, seed)

    be.collect = broken
    return be


@pytest.mark.parametrize("token_pages", [0, 1])
def test_a_failed_start_leaves_no_folder_and_the_retry_is_not_refused(tmp_path, token_pages):
    out = tmp_path / "run"
    cfg = _cfg(out, token_page_every=token_pages)
    with pytest.raises(IndexError):
        train(cfg, backend=_failing(fake_backend(), after=0), progress=False)
    assert not out.exists()
    assert train(cfg, backend=fake_backend(), progress=False)  # the retry trains
    assert [p.name for p in existing_outputs(out)] == ["metrics.jsonl", "checkpoint.pt"] + (
        ["token_pages"] if token_pages else []
    )


def test_a_failed_start_in_an_existing_folder_keeps_the_users_files(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(IndexError):
        train(_cfg(out), backend=_failing(fake_backend(), after=0), progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_a_failure_after_the_first_iteration_keeps_what_was_logged(tmp_path):
    """Iteration 0 was logged (2 groups), iteration 1 fails: the row stays, for --resume to see."""
    out = tmp_path / "run"
    with pytest.raises(IndexError):
        train(_cfg(out, iterations=3), backend=_failing(fake_backend(), after=2), progress=False)
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 1


def test_resume_without_the_metrics_of_the_checkpoints_iterations_is_refused(tmp_path):
    out = tmp_path / "run"
    cfg = _cfg(out, iterations=3)
    train(cfg.replace(iterations=3), backend=fake_backend(), progress=False)
    metrics = out / "metrics.jsonl"
    lines = metrics.read_text().splitlines(keepends=True)
    metrics.unlink()
    with pytest.raises(ckpt.MetricsGap) as caught:
        train(cfg.replace(iterations=5), backend=fake_backend(), resume=True, progress=False)
    assert str(caught.value) == (
        f"--resume: {out}/checkpoint.pt holds 3 iteration(s) but {metrics} is missing: the resumed run's "
        "summary and curves would start at iteration 3, without iterations 0-2; restore metrics.jsonl from a "
        "copy, or start the run again with --overwrite"
    )
    metrics.write_text(lines[0] + lines[2])
    with pytest.raises(ckpt.MetricsGap) as caught:
        ckpt.check_resume(out, cfg.to_dict())
    assert str(caught.value) == (
        f"--resume: {out}/checkpoint.pt holds 3 iteration(s) but {metrics} has no row of iteration(s) 1: "
        "the resumed run's summary and curves would miss them; restore metrics.jsonl from a copy, or start "
        "the run again with --overwrite"
    )
    metrics.write_text("".join(lines))  # restored: the run goes on
    assert [r["iteration"] for r in train(cfg.replace(iterations=4), backend=fake_backend(), resume=True)] == [3]


def test_a_damaged_checkpoints_reason_is_cut_at_a_word():
    long = "PytorchStreamReader failed reading zip archive: " + "failed finding central directory " * 8
    assert ckpt._first_words(long + "\nsecond line") == (
        "PytorchStreamReader failed reading zip archive: "
        + "failed finding central directory " * 4
        + "failed finding ..."
    )
    assert ckpt._first_words("short reason\nmore") == "short reason"
