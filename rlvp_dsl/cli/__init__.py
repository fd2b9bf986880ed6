"""Command-line tools: `rlvp-compile` and `rlvp-score` (thin layers over the library).

Exit codes, as ruff and ty use them: 0 ok, 1 the input has errors, 2 usage or I/O error.
"""

EXIT_OK = 0
EXIT_INPUT_ERRORS = 1
EXIT_USAGE = 2
