"""The README's two screenshots (docs/report.png, docs/token_page.png), taken in headless Chromium.

    rlvp-score rules/tau2_airline.rlvp examples/episodes --html build/report.html
    rlvp-train examples/chain4.toml --method rlvp --iterations 4 --out runs/html_demo
    python docs/screenshots.py

Needs the system's chromium and chromedriver and the test extra (selenium, pillow); the PNGs
are reduced to 256 colours to stay small.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = {
    "report.png": ("build/report.html", (1280, 1500), ["document.querySelectorAll('tr.episode')[1].click();"]),
    "token_page.png": ("runs/html_demo/token_pages/iter_0003.html", (1280, 900), []),
}


def main() -> int:
    from PIL import Image
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or ""
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        for name, (page, (width, height), scripts) in PAGES.items():
            path = os.path.join(REPO, page)
            if not os.path.exists(path):
                print(f"screenshots: {page} is missing: run the commands in this script's docstring", file=sys.stderr)
                return 2
            driver.set_window_size(width, height)
            driver.get(f"file://{path}")
            for script in scripts:
                driver.execute_script(script)
                time.sleep(0.2)
            image = Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("RGB")
            out = os.path.join(REPO, "docs", name)
            image.quantize(colors=256).save(out, optimize=True)
            print(f"wrote {out} ({os.path.getsize(out) // 1024} KB)")
    finally:
        driver.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
