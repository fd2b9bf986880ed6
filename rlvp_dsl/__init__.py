"""rlvp_dsl: the rlvp rule language -- parse, check, compile, score."""
