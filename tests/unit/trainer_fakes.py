"""Hand-built rollouts and credits for the trainer's unit tests (no model, no env), and the tiny policy with a
non-zero adapter (`trained_policy`)."""

from __future__ import annotations

from rlvp_dsl.attach import CallCredits
from rlvp_dsl.events import Episode, Event
from trainer.types import Rollout


def make_rollout(task_id: str, call_lens: list[int], outcome: float, obs_len: int = 2) -> Rollout:
    """A rollout whose calls have the given token lengths, each followed by `obs_len` tool-output tokens."""
    ids, mask, spans, events = [], [], [], []
    for k, n in enumerate(call_lens):
        start = len(ids)
        ids += [10 + k] * n
        mask += [1] * n
        spans.append((start, start + n))
        ids += [3] * obs_len
        mask += [0] * obs_len
        events.append(Event(index=k, kind="call", tool=f"t{k}", arguments={"x": str(k)}))
    ep = Episode(id=task_id, events=events, outcome=outcome)
    return Rollout(task_id, [1, 2], ids, mask, spans, ep, outcome)


def credits_of(values: list[float]) -> CallCredits:
    return CallCredits(tuple(values), tuple(int(v < 0) for v in values), tuple(int(v > 0) for v in values))


# ---------------------------------------------------------------------------
# a fake backend for the loop: a two-layer LM sampling 2-token "calls"
# ---------------------------------------------------------------------------
class FakeLM(__import__("torch").nn.Module):
    """Embedding + linear next-token model over a tiny vocabulary (all parameters train)."""

    def __init__(self, vocab: int = 6, dim: int = 8, seed: int = 0):
        import torch

        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = torch.nn.Embedding(vocab, dim)
        self.out = torch.nn.Linear(dim, vocab)
        with torch.no_grad():
            self.emb.weight.copy_(torch.randn(vocab, dim, generator=g) * 0.1)
            self.out.weight.copy_(torch.randn(vocab, dim, generator=g) * 0.1)
            self.out.bias.zero_()

    def forward(self, input_ids, attention_mask=None):
        from types import SimpleNamespace

        return SimpleNamespace(logits=self.out(self.emb(input_ids)))


def fake_backend(seed: int = 0, calls: int = 3, vocab: int = 6):
    """Backend whose episodes are `calls` calls of 2 sampled tokens + 1 observation token.

    Outcome 1 when every call's first token is 1; the scorer penalises calls starting with 2.
    """
    import torch

    from trainer.envs.base import Task
    from trainer.backend import Backend

    model = FakeLM(vocab, seed=seed)

    def collect(task, n, s):
        gen = torch.Generator().manual_seed(s)
        out = []
        for _ in range(n):
            ids, mask, spans, events = [], [], [], []
            for k in range(calls):
                start = len(ids)
                for _ in range(2):
                    ctx = torch.tensor([[1, 2] + ids])
                    probs = torch.softmax(model(ctx).logits[0, -1], -1)
                    ids.append(int(torch.multinomial(probs, 1, generator=gen)))
                    mask.append(1)
                spans.append((start, start + 2))
                events.append(Event(index=k, kind="call", tool=f"t{ids[start]}", arguments={}))
                ids.append(0)
                mask.append(0)
            outcome = float(all(e.tool == "t1" for e in events))
            ep = Episode(id=task.task_id, events=events, outcome=outcome)
            out.append(Rollout(task.task_id, [1, 2], ids, mask, spans, ep, outcome))
        return out

    def make_tasks(count, s):
        return [Task(f"t{s}-{i}", s + i) for i in range(count)]

    def scorer(episode):
        return [-0.5 if e.tool == "t2" else (0.25 if e.tool == "t1" else 0.0) for e in episode.calls]

    return Backend(model=model, collect=collect, make_tasks=make_tasks, credit_source=scorer, pad_id=0)


#: Every linear layer of the tiny model, the head included: the LoRA targets of `trained_policy`.
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")


def trained_policy(tok, **lora):
    """The tiny model with LoRA on every linear layer and a non-zero adapter (``B`` drawn, seed 1), as
    after some training: with ``B = 0`` an adapter path is trivially exact and ``A`` gets no gradient.
    `lora`: more `LoraSettings` fields (``dropout``)."""
    import torch

    from trainer.model import LoraSettings, TinyModelConfig, apply_lora, build_tiny_model

    torch.manual_seed(1)
    model = apply_lora(
        build_tiny_model(tok, TinyModelConfig(seed=0)), LoraSettings(target_modules=LORA_TARGETS, **lora)
    )
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape) * 0.1)
    return model
