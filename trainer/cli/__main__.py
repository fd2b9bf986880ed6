"""``python -m trainer.cli CONFIG ...``: ``rlvp-train`` without its console script."""

from trainer.cli.train_command import main

if __name__ == "__main__":  # pragma: no cover
    main()
