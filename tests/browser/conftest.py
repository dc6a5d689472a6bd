"""The console in a real headless browser: Debian's chromium driven by Playwright.

The browser is the system's (``/usr/bin/chromium``; ``.ci/run`` installs it with apt-get when
missing), never one ``playwright install`` downloads.  Without it these tests skip with the reason,
except under CI (``CI`` set), where they fail.  Screenshots of every page go to
``artifacts/browser/`` (git-ignored; ``ODRADEK_ARTIFACTS`` moves the parent directory).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.testing.handle import BrokerHandle

CHROMIUM = os.environ.get("ODRADEK_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(os.environ.get("ODRADEK_ARTIFACTS", Path(__file__).resolve().parents[2] / "artifacts")) / "browser"
TIMEOUT_MS = 15_000

pytestmark = pytest.mark.browser


def _need_browser() -> None:
    missing = None
    if not Path(CHROMIUM).exists():
        missing = f"{CHROMIUM} is not installed (apt-get install chromium; .ci/run does it)"
    else:
        try:
            import playwright  # noqa: F401
        except ImportError:
            missing = "playwright is not installed (pip install -e '.[dev]')"
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)


@pytest.fixture(scope="module")
def chromium() -> Iterator:
    """One chromium per module, with a fresh profile (``--user-data-dir``) thrown away after.

    Not per session: Playwright's sync API keeps its own event loop running in this thread
    while it is open, so every asyncio test run after it in the same process would fail with
    "Cannot run the event loop while another loop is running"."""
    _need_browser()
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="odradek-chromium-")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                                        headless=True, viewport={"width": 1280, "height": 900})
        context.set_default_timeout(TIMEOUT_MS)
        try:
            yield context
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)


class Tab:
    """A page of the console, with what a test asserts about it: dialogs opened (an ``alert`` a
    hostile payload could raise) and the screenshots taken."""

    def __init__(self, page, base: str, name: str) -> None:
        self.page = page
        self.base = base.rstrip("/")
        self.name = name
        self.dialogs: list[str] = []
        page.on("dialog", self._dialog)

    def _dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def open(self, path: str):
        response = self.page.goto(self.base + path)
        assert response is not None and response.ok, f"{path}: {response.status if response else 'no answer'}"
        return self.page

    def shot(self, label: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.name}-{label}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def confirm(self, form: str, **fields: str) -> str:
        """Fill and submit a form, confirm on the confirmation page; the result line's text."""
        for name, value in fields.items():
            field = self.page.locator(f"{form} [name={name}]")
            if field.evaluate("e => e.tagName") == "SELECT":
                field.select_option(value)
            elif field.get_attribute("type") == "checkbox":
                field.set_checked(value == "on")
            else:
                field.fill(value)
        self.page.locator(f"{form} button[type=submit]").click()
        self.page.locator("#yes").click()
        return self.page.locator("#result").inner_text()

    def pwned(self) -> bool:
        """Whether any injected script ran (the hostile payloads set this global)."""
        return bool(self.page.evaluate("() => window.__pwned === true")) or bool(self.dialogs)


@pytest.fixture(scope="module")
def console_broker() -> Iterator[BrokerHandle]:
    with BrokerHandle(console=True, schema_registry=True) as handle:
        yield handle


@pytest.fixture
def tab(chromium, console_broker, request) -> Iterator[Tab]:
    page = chromium.new_page()
    try:
        yield Tab(page, console_broker.console_url, re.sub(r"\W+", "-", request.node.name))
    finally:
        page.close()
