"""Headless Chromium for the browser tests: the system's packages (Debian ``chromium`` and
``chromium-driver``, installed by .ci/run), driven by selenium; nothing is downloaded.

The tests skip, saying why, only when the browser, its driver or selenium is absent.
"""

from __future__ import annotations

import os
import shutil

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def _find(names) -> str | None:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="session")
def chromium():
    """A selenium driver of headless Chromium (one for the session; pages are opened with ``.get``)."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the test extra)")
    from selenium.webdriver.chrome.service import Service

    browser = os.environ.get("RLVP_CHROMIUM") or _find(BROWSERS)
    driver_path = os.environ.get("RLVP_CHROMEDRIVER") or _find(("chromedriver",))
    if browser is None or driver_path is None:
        pytest.skip("headless Chromium is absent: apt-get install chromium chromium-driver (.ci/run does)")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--allow-file-access-from-files",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()
