"""The credit hash `rlvp-score` prints last (and `rlvp-score --ray` prints for the same input): one digest per
episode, over its id and credits, and one hash over the sorted digests (so the order episodes were scored in
does not matter). Plain data in, text out; imports nothing of rlvp (rlvp_dsl.integrations.ray computes the
digests in its actors)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable


def episode_digest(episode_id: str, credits: Iterable[tuple[int, str, float]]) -> str:
    """The sha256 (hex) of one episode's credits: its id and each credit's (event index, rule, value, in
    reward units), in scoring order."""
    entry = json.dumps([episode_id, [[int(k), rule, float(value)] for k, rule, value in credits]])
    return hashlib.sha256(entry.encode("utf-8")).hexdigest()


def credit_hash(digests: Iterable[str]) -> str:
    """``sha256:<hex>`` over the episodes' `episode_digest`s in sorted order."""
    return "sha256:" + hashlib.sha256("\n".join(sorted(digests)).encode("ascii")).hexdigest()
