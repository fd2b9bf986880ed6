"""Sampling episodes from the policy: the tiny tokenizer and chat rendering (`tokenizer`), the grammar
of a tool call and its token mask (`call_grammar`), constrained multi-turn sampling (`generation`,
`vllm_backend` on a GPU), and whole groups of episodes as token ids and rlvp events (`rollout`)."""
