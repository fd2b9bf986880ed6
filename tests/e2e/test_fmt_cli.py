"""`rlvp-compile --fmt [--check]` as a subprocess: files rewritten in place (only when they change,
atomically, links and permissions kept), `--check`'s diff and exit codes, a file that does not parse
left untouched (exit 2), standard input, and the flags that do not go with --fmt."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

MESSY = "# header\n\ntool a : read   # the tool\nviolation v (-1.0) { on call a error }   # v\n"
TIDY = "# header\n\ntool a : read  # the tool\n\nviolation v (-1) {\n  on call a error\n}  # v\n"


def run(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "rlvp_dsl.cli.compile", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_fmt_check_then_fmt_then_check_again(tmp_path):
    """--check: a diff naming the file, exit 1, nothing written; --fmt rewrites (mode kept); then exit 0."""
    messy, tidy = tmp_path / "messy.rlvp", tmp_path / "tidy.rlvp"
    messy.write_text(MESSY)
    tidy.write_text(TIDY)
    messy.chmod(0o640)
    done = run("--fmt", "--check", "messy.rlvp", "tidy.rlvp", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("--- messy.rlvp\n+++ messy.rlvp (formatted)\n")
    assert "-violation v (-1.0) { on call a error }   # v\n" in done.stdout and "tidy.rlvp" not in done.stdout
    assert "1 file would be reformatted, 1 already formatted" in done.stderr
    assert messy.read_text() == MESSY

    before = tidy.stat().st_mtime_ns, tidy.stat().st_ino
    done = run("--fmt", "messy.rlvp", "tidy.rlvp", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "messy.rlvp: reformatted" in done.stderr and "1 file reformatted, 1 already formatted" in done.stderr
    assert messy.read_text() == TIDY
    assert messy.stat().st_mode & 0o777 == 0o640
    assert (tidy.stat().st_mtime_ns, tidy.stat().st_ino) == before  # unchanged text: not rewritten
    assert sorted(p.name for p in tmp_path.iterdir()) == ["messy.rlvp", "tidy.rlvp"]  # no temporary left

    done = run("--fmt", "--check", "messy.rlvp", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "")


def test_a_file_that_does_not_parse_is_left_untouched(tmp_path):
    """A syntax error: file:line:col and a caret on stderr, exit 2, the file byte for byte as it was;
    the other files are still formatted."""
    bad, good = tmp_path / "bad.rlvp", tmp_path / "good.rlvp"
    bad.write_bytes(b"tool a\nviolation v (-1) {\n  on call a and\n}\n")
    good.write_text(MESSY)
    done = run("--fmt", "bad.rlvp", "good.rlvp", cwd=tmp_path)
    assert done.returncode == 2
    assert "bad.rlvp:4:1: error[RV101]: " in done.stderr and "^" in done.stderr
    assert "1 not formatted (errors above)" in done.stderr
    assert bad.read_bytes() == b"tool a\nviolation v (-1) {\n  on call a and\n}\n"
    assert good.read_text() == TIDY
    assert run("--fmt", "--check", "bad.rlvp", cwd=tmp_path).returncode == 2


def test_a_link_is_formatted_through(tmp_path):
    """A symbolic link stays a link; its target gets the formatted text."""
    (tmp_path / "real.rlvp").write_text(MESSY)
    (tmp_path / "link.rlvp").symlink_to("real.rlvp")
    assert run("--fmt", "link.rlvp", cwd=tmp_path).returncode == 0
    assert (tmp_path / "link.rlvp").is_symlink()
    assert (tmp_path / "real.rlvp").read_text() == TIDY


def test_standard_input_and_refused_flags(tmp_path):
    """`--fmt -` prints the formatted text; flags that do nothing with --fmt, and a missing file, exit 2."""
    done = run("--fmt", "-", cwd=tmp_path, stdin=MESSY)
    assert (done.returncode, done.stdout) == (0, TIDY)
    done = run("--fmt", "--json", "x.rlvp", cwd=tmp_path)
    assert done.returncode == 2 and "--json does not go with --fmt" in done.stderr
    done = run("--fmt", "missing.rlvp", cwd=tmp_path)
    assert done.returncode == 2 and "file not found: missing.rlvp" in done.stderr


def test_check_says_crlf_line_endings_in_one_line_not_as_every_line_changed(tmp_path):
    """A canonical file saved with CRLF: `--check` says the line endings change, and the diff
    after it is empty (exit 1); `--fmt` writes LF."""
    path = tmp_path / "w.rlvp"
    path.write_bytes(TIDY.replace("\n", "\r\n").encode())
    done = run("--fmt", "--check", "w.rlvp", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout == "w.rlvp: line endings CRLF -> LF\n"
    assert run("--fmt", "w.rlvp", cwd=tmp_path).returncode == 0
    assert path.read_bytes() == TIDY.encode()
