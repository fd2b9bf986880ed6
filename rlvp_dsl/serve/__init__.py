"""`rlvp serve`: rlvp as a reward service over HTTP (FastAPI + uvicorn, the ``serve`` extra).

    rlvp serve rules/tau2_airline.rlvp --port 8000            # 127.0.0.1 by default
    curl -s --data-binary @run.json localhost:8000/score       # any trajectory format the readers take
    curl -s localhost:8000/get_reward -d '{"query": ["<|im_start|>user..."]}'   # OpenRLHF's contract

Routes (docs/integrations.md, "rlvp serve"): ``POST /score``, ``POST /get_reward``, ``GET /healthz``,
``POST /verify``, ``GET /reverify_mode``, ``GET /rules``, ``GET /metrics``.  Every answer that used rules names their hash.

Module map, one job each:

* ``cli`` -- ``rlvp serve``'s options, the checks made before serving (rules, host and token), the
  uvicorn server (one process, or a supervisor of worker processes);
* ``app`` -- the FastAPI application: routes, error answers, the reload signal;
* ``rulesets`` -- the rule sets served: loading and checking, the hash, the holder swapped whole
  on reload, the snapshot workers read;
* ``bodies`` -- the one way every route reads a body (JSON, the BOM, the depth limit, the error
  signal) and the one shape of a 422 (`BadInput`: message, record, field);
* ``scoring`` -- ``/score``: a request body read as the trajectory file it is (bad records left
  out and listed), scored, with rlvp-score's notes;
* ``envelope`` -- ``/score``'s token envelope ``{"trajectory", "tokens"}`` and its mistakes;
* ``transcript`` -- a chat-templated text (ChatML, Llama 3) read back into an episode;
* ``openrlhf`` -- ``/get_reward``: OpenRLHF's remote reward contract;
* ``nemo_gym`` -- ``/verify`` and ``/reverify_mode``: NeMo Gym's verifier contract;
* ``models`` -- the request and answer shapes (pydantic);
* ``auth`` -- the bearer token (constant-time compare) and the loopback test;
* ``limits`` -- the request body size limit;
* ``metrics`` -- Prometheus metrics (prometheus_client; aggregated across worker processes);
* ``supervisor`` -- uvicorn's worker supervisor, whose SIGHUP checks the rules before the workers reload.

Nothing here is imported by the language core; this package imports the language core only.
"""

from __future__ import annotations


def command() -> None:
    """The ``rlvp`` console script (``rlvp serve ...``)."""
    from rlvp_dsl.cli import launch

    launch("rlvp_dsl.serve.cli", "rlvp")
