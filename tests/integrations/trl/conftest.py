"""Shared pieces of the TRL tests: an offline tiny model and tokenizer, scripted rollouts.

The completions are scripted through TRL's own ``rollout_func`` mode (a real multi-turn
mode of GRPOTrainer): every test knows exactly which tokens each call occupies.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/ (conftest's REPO, DATA)
