"""Write docs/diagnostics.md from the codes table (rlvp_dsl/diagnostics.py, CODES) and the
explanations beside it (rlvp_dsl/diagnostic_docs.py, DOCS).

    python docs/gen_diagnostics.py           # rewrite the page
    python docs/gen_diagnostics.py --check   # exit 1 when the page is out of date (the test suite runs this)
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "diagnostics.md"


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(REPO))
    from rlvp_dsl.diagnostic_docs import missing_docs, render_page

    missing = missing_docs()
    if missing:
        print(
            f"gen_diagnostics: codes without an entry in rlvp_dsl/diagnostic_docs.py DOCS (or entries for "
            f"codes not in diagnostics.CODES): {', '.join(missing)}",
            file=sys.stderr,
        )
        return 1
    text = render_page()
    if "--check" in argv:
        if not PAGE.is_file() or PAGE.read_text(encoding="utf-8") != text:
            print(
                f"gen_diagnostics: {PAGE.relative_to(REPO)} is out of date: run python docs/gen_diagnostics.py",
                file=sys.stderr,
            )
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
