"""The commands' argument parser (rlvp_dsl.cli.options): a mistyped option is the error, named
with the closest real option; everything argparse accepts is still accepted."""

from __future__ import annotations

import pytest

from rlvp_dsl.cli.options import ArgumentParser


def parser() -> ArgumentParser:
    p = ArgumentParser(prog="tool")
    p.add_argument("rules")
    p.add_argument("trajectories", nargs="+")
    p.add_argument("--explain", action="store_true")
    p.add_argument("--json")
    p.add_argument("-n", type=int)
    p.add_argument("--scale", type=float)
    return p


def error_of(p: ArgumentParser, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        p.parse_args(argv)
    assert stop.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "argv, says",
    [
        # argparse alone: "the following arguments are required: trajectories"
        (["r.rlvp", "--explian", "runs/"], "tool: error: unrecognized arguments: --explian (did you mean --explain?)"),
        (
            ["r.rlvp", "runs/", "--jsn=o.json"],
            "tool: error: unrecognized arguments: --jsn=o.json (did you mean --json?)",
        ),
        (["r.rlvp", "runs/", "--zzz"], "tool: error: unrecognized arguments: --zzz"),
        (["r.rlvp", "runs/", "-x"], "tool: error: unrecognized arguments: -x"),
        # the unknown option comes before argparse's own complaint about a value
        (
            ["r.rlvp", "runs/", "-n", "many", "--explane"],
            "tool: error: unrecognized arguments: --explane (did you mean --explain?)",
        ),
    ],
)
def test_a_mistyped_option_is_named_with_the_closest(argv, says, capsys):
    assert error_of(parser(), argv, capsys) == says


@pytest.mark.parametrize(
    "argv, says",
    [
        (["r.rlvp"], "tool: error: the following arguments are required: trajectories"),
        (["r.rlvp", "runs/", "-n", "many"], "tool: error: argument -n: invalid int value: 'many'"),
        # after `--` every word is a value: argparse's own message for a missing one stands
        (["--", "--explian"], "tool: error: the following arguments are required: trajectories"),
    ],
)
def test_other_errors_are_argparses_own(argv, says, capsys):
    assert error_of(parser(), argv, capsys) == says


def test_what_argparse_accepts_is_accepted():
    """Known options, unique prefixes, values with `=`, short options with attached values,
    negative numbers as values, `-` (standard input) and words after `--`."""
    args = parser().parse_args(["r.rlvp", "-", "--expl", "--json=-", "-n5", "--scale", "-0.5"])
    assert parser().parse_args(["r.rlvp", "--", "-odd"]).trajectories == ["-odd"]
    assert (args.rules, args.trajectories, args.explain, args.json, args.n, args.scale) == (
        "r.rlvp",
        ["-"],
        True,
        "-",
        5,
        -0.5,
    )


def test_a_sub_commands_options_are_its_own(capsys):
    """`rlvp serve --port 1`: the top parser does not call a sub-command's option unknown, and a
    mistyped one is the sub-command's error (its usage), matched among its options."""
    top = ArgumentParser(prog="rlvp")
    commands = top.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve")
    serve.add_argument("--port", type=int)
    assert top.parse_args(["serve", "--port", "1"]).port == 1
    assert (
        error_of(top, ["serve", "--prot", "1"], capsys)
        == "rlvp serve: error: unrecognized arguments: --prot 1 (did you mean --port?)"  # its own usage and name
    )
    assert error_of(top, ["srve"], capsys).startswith("rlvp: error: argument command: invalid choice: 'srve'")
