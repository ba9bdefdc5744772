"""Debian's Chromium driven by playwright, for the console's browser tests.

Playwright cannot download its own browser here, so the tests drive ``/usr/bin/chromium``
(``apt-get install -y chromium``; ``LGC_TEST_CHROMIUM`` names another binary).  Without it, or
without the ``playwright`` package, a browser test is skipped locally and fails when ``CI`` is
set, as tests of missing services do (``services.require``).
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from services import require

CHROMIUM_ENV = "LGC_TEST_CHROMIUM"


def chromium_path() -> str:
    return os.environ.get(CHROMIUM_ENV) or shutil.which("chromium") or "/usr/bin/chromium"


def launch(playwright: Any) -> Any:
    """A headless Chromium, or skip/fail (in CI) saying how to install what is missing."""
    path = chromium_path()
    require(
        "chromium",
        os.access(path, os.X_OK),
        f"no Chromium at {path}: apt-get install -y chromium (or set {CHROMIUM_ENV})",
    )
    return playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])


def start_playwright() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require("playwright", False, "pip install playwright (the test extra has it)")
        raise
    return sync_playwright().start()
