"""Every float tolerance of the suite, and why it is what it is (issue 17, section 1).

Four kinds of comparison, four rules:

1. **Exact (``==``, `torch.equal`)** -- the same code path on the same inputs on the same machine
   performs the same operations in the same order, so it gives the same bits: a resumed run
   equals an uninterrupted one, the same seed gives the same rollouts, an untouched weight is
   untouched.  Kernels whose order depends on the thread count run with it pinned (the test
   modules call ``torch.set_num_threads(1)``; `trainer.loop.train` sets ``cfg.threads``).  Also
   exact: results that are representable and built by correctly rounded operations, whatever
   their order -- sums and products of a few dyadic values (0.25, -0.5, 1.5: exact in binary),
   the rule credits of Python floats (IEEE ``+ - * /`` are correctly rounded on every CPU).
2. **Two summation orders** -- two code paths for one quantity (a prompt computed once vs per
   row, a KV cache vs a full forward pass, micro-batches vs one batch, a wider padding, another
   CPU's matmul kernels) round differently, and no CPU-independent order exists.  Compare with
   `assert_close`, whose bound follows Higham, *Accuracy and Stability of Numerical Algorithms*
   (2nd ed., 2002):

   * a sum or dot product of ``n`` terms, in any order, in a precision of unit roundoff ``u``
     (`unit_roundoff`: float32 2**-24, float64 2**-53) is within ``gamma_n * sum|x_i|`` of the exact
     value, ``gamma_n = n u / (1 - n u)`` (§3.1, Lemma 3.1 and eq. (3.5));
   * relative errors of chained steps compose: ``(1 + theta_j)(1 + theta_k) = 1 + theta_{j+k}``
     (Lemma 3.3), so a value computed through reductions of lengths ``n_1, n_2, ...`` (a
     matmul over the hidden size, attention over the sequence, the log-sum-exp over the
     vocabulary, a gradient summed over the tokens) is bounded by ``gamma`` of their total
     length -- `terms` adds them up;
   * two computations, each within that bound of the exact value, differ by at most twice it.

   The bound needs ``sum|x_i|``, which the assertion does not have: the largest ``|expected|``
   of the compared tensor stands in for it (a *normwise* comparison).  An element-wise relative
   tolerance is wrong here: a gradient element that is small only because its terms cancel
   carries the absolute error of its large terms (issue 17: 2 of 1,024 gradient values off by
   7.2e-6 against ``atol=1e-6, rtol=1e-4``, largest |gradient| ~ 0.2-3).  The bound assumes each
   step is well conditioned (softmax, RMS norm and k3 on values of order 1, as in these tests).
3. **One rounding, no order** -- a Python value stored once in float32 (an advantage ``W x credit``
   read back from TRL's batch, a token page's ``o + p``): ``|fl(x) - x| <= u |x|`` on every CPU, so
   a fixed ``abs`` above ``u`` times the largest value (``1e-7`` for values up to 1.6, ``1e-6`` for
   sums of a few such) is a bound, not a guess; float64 Python sums of a few rule weights use
   `pytest.approx` (its ``rel=1e-6`` is far above ``gamma_n`` in float64 for any n here).
4. **Approximate on purpose** -- a quantity computed another way with its own approximation (a
   CSV rounded to ``CSV_DECIMALS``): the tolerance is that approximation's, at the call site.

Known and accepted: sampled token ids compared across two code paths (the KV-cached sampler vs
re-feeding, `tests/unit/test_cached_sampling.py`) are equal unless a uniform draw lands within
the rounding (~1e-7) of a boundary of the cumulative probabilities: about 1e-7 per token, a few
thousand tokens per run.

Measured (``RLVP_TOLERANCE_LOG=file pytest ...`` appends each comparison's difference and bound)
on this machine (AMD EPYC) with 1 and 2 threads, and with other kernels standing in for another
CPU (``ATEN_CPU_CAPABILITY=default``: no vectorised ATen loops; ``MKL_CBWR=COMPATIBLE``: MKL's
portable GEMM); the largest difference and the bound, both relative to the scale:

==========================================================  =================  =================
comparison                                                  difference         bound
==========================================================  =================  =================
log-probs: action positions vs full vocabulary              2.0e-7             8.5e-5
their gradients (the failing test of issue 17)              2.2e-6             1.0e-4
shared prompt computed once: gradients                      2.0e-6             1.0e-4
sampler vs trainer log-probs (re-fed / cached / in loop)    2.0e-7             8.1e-5
KV cache with holes vs one forward pass: logits             2.6e-7             3.4e-5
token-capped micro-batches: gradients / AdamW weights       1.3e-7 / 7.5e-8    7.4e-6 / 1.2e-6
wider padding (longer tool output): gradients               9.6e-8             1.1e-5
masked rows and padding appended: loss                      5.9e-8             8.3e-7
logged KL vs one rollout at a time                          1.2e-8             1.4e-4
==========================================================  =================  =================

The former tolerances (``atol=1e-6, rtol=1e-4`` element-wise) fail here too with
``ATEN_CPU_CAPABILITY=default``, as on the machine of issue 17.
On the machine of issue 17 the log-prob gradient test was off by 7.2e-6 absolute in 2 values,
against largest gradients of ~0.2-3: at most ~4e-5 relative, inside its bound.  The bounds stay
sharp: scaling the LoRA head's term by 0.999 in `trainer.logprobs._head_rows` fails that test
(2.4e-4 against a bound of 2.7e-5).
"""

from __future__ import annotations

import os
from typing import Iterable, Sequence

import torch

#: Unit roundoff (half the machine epsilon) per dtype: round-to-nearest gives |fl(x) - x| <= u |x|.
UNIT_ROUNDOFF = {
    torch.float64: 2.0**-53,
    torch.float32: 2.0**-24,
    torch.bfloat16: 2.0**-8,
    torch.float16: 2.0**-11,
}


def unit_roundoff(dtype: torch.dtype) -> float:
    """``u`` of ``dtype`` (float32: 2**-24 ~ 6.0e-8; float64: 2**-53 ~ 1.1e-16)."""
    return UNIT_ROUNDOFF[dtype]


def gamma(n: int, dtype: torch.dtype = torch.float32) -> float:
    """Higham's ``gamma_n = n u / (1 - n u)``: the relative error bound of ``n`` chained roundings.

    Raises:
        ValueError: ``n u >= 1`` (the bound says nothing).
    """
    nu = n * unit_roundoff(dtype)
    if nu >= 1:
        raise ValueError(f"gamma_n needs n * u < 1 (got n = {n} in {dtype})")
    return nu / (1 - nu)


def terms(*lengths: int) -> int:
    """The total reduction length of a chain of steps (Lemma 3.3: their gammas add up).

    A forward pass of a ``layers``-deep transformer of width ``H``, MLP width ``I``, over ``L``
    positions, then a log-softmax over ``V`` ids: ``terms(*[H, I, L] * layers, V)``; its gradient
    summed over ``N`` tokens: add ``N``.
    """
    return sum(int(n) for n in lengths)


def transformer_terms(model, seq_len: int, tokens: int = 0) -> int:
    """`terms` of a log-prob from a Hugging Face decoder (``model.config``: hidden, MLP width, layers,
    vocabulary) over ``seq_len`` positions; ``tokens`` > 0 adds a gradient's sum over that many tokens."""
    c = model.config
    return terms(*[c.hidden_size, c.intermediate_size, seq_len] * c.num_hidden_layers, c.vocab_size, tokens)


def tolerance(n: int, dtype: torch.dtype = torch.float32) -> float:
    """The largest relative (normwise) difference of two computations, in any orders, of a value
    whose chain of reductions is ``n`` long: ``2 gamma_n``."""
    return 2.0 * gamma(n, dtype)


def _tensor(x) -> torch.Tensor:
    return x.detach() if isinstance(x, torch.Tensor) else torch.as_tensor(x, dtype=torch.float64)


def coarsest(*xs) -> torch.dtype:
    """The dtype whose rounding dominates a comparison of ``xs`` (the one with the largest ``u``);
    Python floats count as float64."""
    return max((_tensor(x).dtype for x in xs), key=lambda d: UNIT_ROUNDOFF.get(d, 0.0))


def assert_close(
    actual, expected, *, n: int, dtype: torch.dtype | None = None, scale: float | None = None, what: str = ""
) -> float:
    """Assert ``max|actual - expected| <= tolerance(n, dtype) * scale``; returns the difference
    relative to ``scale``.

    Args:
        actual, expected: tensors (or floats / lists of floats) of one shape; NaN and inf must
            sit at the same places.
        n: the chain length of the computation (`terms`).
        dtype: the precision both were computed in (default: the `coarsest` of the two).
        scale: what stands for ``sum|x_i|`` (default: ``max|expected|``, at least the smallest
            normal number, so an all-zero tensor must match exactly up to underflow).
        what: names the compared value in the failure message.
    """
    a, e = _tensor(actual), _tensor(expected)
    assert a.shape == e.shape, f"{what}: shape {tuple(a.shape)} != {tuple(e.shape)}"
    dtype = dtype or coarsest(a, e)
    a, e = a.double(), e.double()
    finite = torch.isfinite(e)
    assert torch.equal(finite, torch.isfinite(a)) and torch.equal(a[~finite], e[~finite]), (
        f"{what}: non-finite values differ"
    )
    a, e = a[finite], e[finite]
    if scale is None:
        scale = float(e.abs().max()) if e.numel() else 0.0
    scale = max(scale, torch.finfo(dtype).tiny)
    diff = float((a - e).abs().max()) if e.numel() else 0.0
    bound = tolerance(n, dtype)
    if os.environ.get("RLVP_TOLERANCE_LOG"):  # the margins, for the table in the docstring above
        with open(os.environ["RLVP_TOLERANCE_LOG"], "a", encoding="utf-8") as log:
            log.write(
                f"{os.environ.get('PYTEST_CURRENT_TEST', '?').split(' ')[0]}\t{what}\t{diff / scale:.3g}\t{bound:.3g}\n"
            )
    assert diff <= bound * scale, (
        f"{what or 'values'}: largest difference {diff:.3g} exceeds "
        f"2 gamma_{n} x {scale:.3g} = {bound * scale:.3g} ({dtype})"
    )
    return diff / scale


def assert_all_close(
    actuals: Iterable, expecteds: Sequence, *, n: int, dtype: torch.dtype | None = None, what: str = ""
) -> float:
    """`assert_close` for each pair (each tensor against its own largest value, e.g. the gradient
    of each parameter); returns the largest relative difference."""
    actuals = list(actuals)
    assert len(actuals) == len(expecteds), f"{what}: {len(actuals)} tensors != {len(expecteds)}"
    return max(
        (
            assert_close(a, e, n=n, dtype=dtype, what=f"{what}[{k}]")
            for k, (a, e) in enumerate(zip(actuals, expecteds, strict=True))
        ),
        default=0.0,
    )
