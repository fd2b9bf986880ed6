"""How fast a large `rlvp-score --html` report opens in a browser: lazy timelines vs drawing them all.

Reads the shared tau2 airline simulations (or examples/episodes when they are absent),
replicates them to --episodes episodes, writes the report, opens it in headless Chromium
(the system's chromium and chromedriver, through selenium) and prints, alternating
--repeats times in the same browser:

* the page's own load time (navigation start to the load event, from the browser's
  Performance API) -- the page as shipped: the episode list only, timelines drawn when
  opened;
* the time to draw every timeline at once (what an eagerly rendered page would pay on top);
* their ratio.

    python benchmarks/html_report_open.py                   # 1,000 episodes
    python benchmarks/html_report_open.py --episodes 5000
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from rlvp_dsl.html import build_report, write_report  # noqa: E402
from rlvp_dsl.pipeline import check_file  # noqa: E402
from rlvp_dsl.compile import compile_ruleset  # noqa: E402
from rlvp_dsl.readers import read_paths  # noqa: E402

SHARED = os.path.join(os.path.dirname(REPO), "shared", "data", "tau2_simulations")


def _driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--episodes", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    source = SHARED if os.path.isdir(SHARED) else os.path.join(REPO, "examples", "episodes")
    checked = check_file(os.path.join(REPO, "rules", "tau2_airline.rlvp"))
    program = compile_ruleset(checked.ruleset)
    episodes = [e for e in read_paths([source]) if e.meta.get("domain") in (None, "airline")]
    scored = [(e, program.score(e)) for e in episodes]
    scored = (scored * (args.episodes // len(scored) + 1))[: args.episodes]
    t0 = time.perf_counter()
    report = build_report(program, scored, checked.sources)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_report(report, os.path.join(tmp, "report.html"))
        build_s = time.perf_counter() - t0
        size_mb = os.path.getsize(path) / 1e6
        print(f"{len(scored)} episodes ({sum(len(e.events) for e, _ in scored)} events) from {source}")
        print(f"report: {size_mb:.1f} MB, built and written in {build_s:.2f} s")
        driver = _driver()
        loads, eager = [], []
        try:
            for _ in range(args.repeats):
                driver.get(f"file://{path}")
                loads.append(
                    driver.execute_script(
                        "const t = performance.getEntriesByType('navigation')[0]; return t.loadEventEnd - t.startTime;"
                    )
                    / 1e3
                )
                eager.append(
                    driver.execute_script(
                        "const t = performance.now(); document.querySelectorAll('tr.episode').forEach(r => r.click());"
                        "document.body.offsetHeight; return performance.now() - t;"
                    )
                    / 1e3
                )
        finally:
            driver.quit()
    load, draw = statistics.median(loads), statistics.median(eager)
    print(
        f"open (episode list, timelines lazy): {load:.2f} s   (median of {args.repeats}: "
        + ", ".join(f"{x:.2f}" for x in loads)
        + ")"
    )
    print(f"draw every timeline at once:         {draw:.2f} s   (" + ", ".join(f"{x:.2f}" for x in eager) + ")")
    print(f"ratio: drawing every timeline takes {draw / load:.1f}x the lazy page's whole load")
    print(f"machine load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
