"""The admin in a real browser: headless Chromium (Debian's ``chromium`` + ``chromium-driver``,
installed by ``scripts/browser up``, which ``make test`` runs) driven by Selenium against
pytest-django's live server, on the real services.

- ``driver``: one Chromium for the session (1400x1000). No Chromium or driver is a failure with
  one readable line, never a skip.
- ``page``: a logged-in staff superuser's browser (``tests.browser.pages.Page``), cookies cleared
  first (every test's database is flushed, sessions included).
- ``SCREENSHOTS=1`` makes ``Page.shot`` save PNGs into docs/screenshots/ (README "Screenshots").
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service

from tests.browser.pages import PASSWORD, Page

WINDOW = (1400, 1000)


def _binary(variable: str, *names: str) -> str:
    """The binary ``variable`` names, else the first of ``names`` on PATH; fails (never skips)
    with the command that installs it."""
    chosen = os.environ.get(variable)
    found = shutil.which(chosen) if chosen else next(filter(None, map(shutil.which, names)), None)
    if found is None:
        pytest.fail(
            f"{chosen or ' / '.join(names)} not found: the browser tests need Debian's chromium "
            "and chromium-driver (scripts/browser up installs them; make test runs it)",
            pytrace=False,
        )
    return found


@pytest.fixture(scope="session")
def driver() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = _binary("CHROME_BIN", "chromium", "chromium-browser")
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        "--lang=en-US",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # Page.console_errors
    service = Service(executable_path=_binary("CHROMEDRIVER", "chromedriver"))
    try:
        chrome = webdriver.Chrome(options=options, service=service)
    except WebDriverException as exc:
        pytest.fail(f"headless Chromium did not start: {exc.msg}", pytrace=False)
    chrome.set_page_load_timeout(60)
    yield chrome
    chrome.quit()


@pytest.fixture
def operator(transactional_db: Any) -> User:
    return User.objects.create_superuser("operator", "operator@example.com", PASSWORD)


@pytest.fixture
def page(driver: webdriver.Chrome, live_server: Any, operator: User) -> Page:
    """The operator's browser, logged in at /admin/login/."""
    browser = Page(driver, live_server.url)
    driver.delete_all_cookies()
    driver.set_window_size(*WINDOW)
    browser.login(operator.username)
    return browser
