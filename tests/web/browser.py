"""Headless Chromium from the system's packages (/usr/bin/chromium, chromium-driver),
driven by Selenium. Absent: the browser tests skip, unless CI=true (then they fail)."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import pytest

CHROMIUM = os.environ.get("AGENVOY_CHROMIUM", "/usr/bin/chromium")
DRIVER = os.environ.get("AGENVOY_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,900"]
PAGE_LOAD = 120  # seconds a page may take on a busy machine before the test fails


def require_chromium() -> None:
    missing = [p for p in (CHROMIUM, DRIVER) if not os.access(p, os.X_OK)]
    if not missing:
        return
    why = f"{' and '.join(missing)} missing (apt-get install chromium chromium-driver)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"browser tests must run in CI: {why}")
    pytest.skip(why)


def start() -> Any:
    """A fresh headless Chromium with its own profile; the caller quits it."""
    require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="agenvoy-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager never downloads anything
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    driver.set_page_load_timeout(PAGE_LOAD)
    driver._agenvoy_profile = profile  # type: ignore[attr-defined]
    return driver


def quit_browser(driver: Any) -> None:
    try:
        driver.quit()
    finally:
        shutil.rmtree(getattr(driver, "_agenvoy_profile", ""), ignore_errors=True)
