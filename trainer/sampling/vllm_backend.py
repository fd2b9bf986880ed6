"""Optional vLLM generation backend (GPU only; untested in the CPU environment).

Status, honestly: vLLM pins its own torch and transformers, so it lives in a
separate GPU environment (``pip install rlvp[vllm]`` there), never in the CPU one
this project is developed and tested in.  This module has not been run here; it
is kept small so it can be checked by reading.  Nothing imports it unless asked:
`VLLMGenerator(...)` imports vLLM in its constructor and raises ImportError with
the install hint when vLLM is missing.

It plugs into the same rollout code as the HF path: `trainer.sampling.rollout.collect_group`
accepts any policy object with `sample_turns(contexts, trie, cfg)`, so

    gen = VLLMGenerator("path/to/base_model", tokenizer)   # base weights, LoRA enabled
    gen.sync_lora(peft_model)                              # after every optimiser step
    collect_group(gen, tokenizer, env_factory, task, G, GenConfig(), seed)

Differences from the HF path (`trainer.sampling.generation.HFGenerator`):

1. The call mask is vLLM's structured output with ``choice`` = every valid call
   string; the sampled tokenisation of a call may differ from the trie's canonical
   one, so calls are parsed from the decoded text, and the span is the sampled ids.
2. No reasoning segment (`GenConfig.think_max_tokens` must be 0).
3. Log-probs are vLLM's per-token log-probs of the sampled tokens (raw model
   distribution, not renormalised over the mask), and ``allowed`` is None for every
   token: a trainer using the call mask recomputes with the full softmax there.
4. LoRA weights are synced by saving the peft adapter to a fresh directory and
   sending it as a new `LoRARequest` (a new integer id per version).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Sequence

from trainer.sampling.call_grammar import CallTrie

from trainer.sampling.generation import GenConfig, TurnSample

INSTALL_HINT = "the vLLM backend needs vllm in a separate GPU environment: pip install 'rlvp[vllm]'"


def _import_vllm():
    try:
        import vllm  # noqa: F401
        from vllm import LLM, SamplingParams
        from vllm.lora.request import LoRARequest
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(f"{INSTALL_HINT} ({exc})") from None
    return LLM, SamplingParams, LoRARequest


def _choice_params(SamplingParams, choices: list[str], **kwargs):
    """SamplingParams constrained to `choices` (newer vLLM: structured_outputs; older: guided_decoding)."""
    try:
        from vllm.sampling_params import StructuredOutputsParams

        return SamplingParams(structured_outputs=StructuredOutputsParams(choice=choices), **kwargs)
    except ImportError:
        from vllm.sampling_params import GuidedDecodingParams

        return SamplingParams(guided_decoding=GuidedDecodingParams(choice=choices), **kwargs)


class VLLMGenerator:
    """Constrained turns sampled by vLLM, with the policy's LoRA adapter synced in.

    Args:
        model_path: a local HF checkpoint of the *base* model (vLLM loads it itself).
        tokenizer: the same tokenizer the rollout uses (for decoding and EOS).
        max_lora_rank: the largest LoRA rank that will be synced.
        llm_kwargs: passed to `vllm.LLM` (e.g. ``gpu_memory_utilization=0.3``).
    Raises ImportError (with the install hint) when vLLM is not installed.
    """

    def __init__(self, model_path: str | Path, tokenizer, max_lora_rank: int = 16, **llm_kwargs) -> None:
        LLM, self._SamplingParams, self._LoRARequest = _import_vllm()
        self.tokenizer = tokenizer
        self.llm = LLM(model=str(model_path), enable_lora=True, max_lora_rank=max_lora_rank, **llm_kwargs)
        self._lora = None
        self._version = 0
        self._dir = tempfile.TemporaryDirectory(prefix="rlvp-vllm-lora-")

    def sync_lora(self, peft_model) -> None:
        """Save the current adapter and use it for every following generation."""
        self._version += 1
        path = Path(self._dir.name) / f"v{self._version}"
        peft_model.save_pretrained(str(path))
        self._lora = self._LoRARequest(f"policy-v{self._version}", self._version, str(path))

    def sample_turns(
        self, contexts: Sequence[Sequence[int]], trie: CallTrie, cfg: GenConfig, seed: int | None = None
    ) -> list[TurnSample]:
        """One constrained call per context; see the module docstring for the differences."""
        if cfg.think_max_tokens:
            raise ValueError("the vLLM backend does not support think_max_tokens > 0")
        from vllm.inputs import TokensPrompt

        import torch

        if seed is None:  # collect_group seeds the torch RNG; one request seed per row
            seed = int(torch.randint(0, 2**31 - len(contexts), ()))
        params = [
            _choice_params(
                self._SamplingParams,
                list(trie.texts),
                temperature=cfg.temperature,
                max_tokens=cfg.max_new_tokens or 4 * trie.max_len + 1,
                logprobs=0,
                seed=seed + row,
            )
            for row in range(len(contexts))
        ]
        prompts = [TokensPrompt(prompt_token_ids=list(c)) for c in contexts]
        outputs = self.llm.generate(prompts, params, lora_request=self._lora, use_tqdm=False)
        samples = []
        for out in outputs:
            completion = out.outputs[0]
            ids = list(completion.token_ids)
            logprobs = [
                float(step[tok].logprob) if step and tok in step else 0.0
                for tok, step in zip(ids, completion.logprobs or [None] * len(ids), strict=False)
            ]
            ended = bool(ids) and ids[-1] == trie.eos_id
            call_end = len(ids) - 1 if ended else len(ids)
            text = self.tokenizer.decode(ids[:call_end])
            index = trie.texts.index(text) if text in trie.texts else None
            samples.append(
                TurnSample(
                    ids=ids,
                    logprobs=logprobs,
                    policy_logprobs=logprobs,
                    allowed=[None] * len(ids),
                    call=trie.calls[index] if index is not None else None,
                    call_text=text,
                    call_start=0,
                    call_end=call_end,
                    ended_with_eos=ended,
                )
            )
        return samples
