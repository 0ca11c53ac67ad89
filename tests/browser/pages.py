"""What an operator does in the browser, as short calls: open a page, log in, read an element's
text, press a campaign page's button (accepting or dismissing its confirm), wait for the page to
change by itself, mark the page to prove it was not reloaded, and save a screenshot."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select, WebDriverWait

PASSWORD = "operator-pw-1"
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
WAIT_S = 30.0


class Page:
    def __init__(self, driver: webdriver.Chrome, base_url: str) -> None:
        self.driver = driver
        self.base = base_url.rstrip("/")

    # -- navigation ------------------------------------------------------------------------------
    def open(self, path: str) -> None:
        self.driver.get(self.base + path)

    @property
    def path(self) -> str:
        url: str = self.driver.current_url
        return url.removeprefix(self.base)

    def login(self, username: str, password: str = PASSWORD) -> None:
        self.open("/admin/login/")
        self.find("#id_username").send_keys(username)
        self.find("#id_password").send_keys(password)
        self.submit_with(self.find('#login-form [type="submit"]'))
        self.wait(lambda: not self.path.startswith("/admin/login/"), "the login to finish")

    # -- reading -----------------------------------------------------------------------------------
    def find(self, css: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def all(self, css: str) -> list[WebElement]:
        return list(self.driver.find_elements(By.CSS_SELECTOR, css))

    def text(self, css: str) -> str:
        """The visible text of the first element ``css`` matches ("" when there is none)."""
        try:
            return str(self.find(css).text)
        except (NoSuchElementException, StaleElementReferenceException):
            return ""

    def body(self) -> str:
        return self.text("body")

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def console_errors(self) -> list[str]:
        """The browser console's errors since the last call (uncaught exceptions, failed loads);
        reading the log empties it."""
        entries = self.driver.get_log("browser")
        return [str(e["message"]) for e in entries if e.get("level") == "SEVERE"]

    def scrolls_sideways(self) -> bool:
        width = self.js("return [document.documentElement.scrollWidth, window.innerWidth];")
        return bool(width[0] > width[1])

    def messages(self) -> list[str]:
        return [str(m.text) for m in self.all("ul.messagelist li")]

    def wait(self, predicate: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
        """Poll ``predicate`` until truthy; fail naming ``what`` and the page otherwise."""
        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.2).until(
                lambda _: predicate()
            )
        except Exception as exc:
            raise AssertionError(f"waited {timeout}s for {what} on {self.path}") from exc

    # -- not reloaded --------------------------------------------------------------------------
    def mark(self) -> str:
        """Tag the loaded document; ``marked`` answers the tag until a reload or a navigation."""
        tag = f"m{id(self)}-{self.js('return performance.timeOrigin')}"
        self.js("window.__missiveMark = arguments[0];", tag)
        return tag

    def marked(self) -> str | None:
        value = self.js("return window.__missiveMark || null;")
        return None if value is None else str(value)

    def navigations(self) -> int:
        return int(self.js("return performance.getEntriesByType('navigation').length;"))

    # -- acting ----------------------------------------------------------------------------------
    def replaced(self, old: WebElement) -> None:
        """Wait until the document ``old`` belongs to was replaced by the next page."""

        def gone(_: Any) -> bool:
            try:
                old.is_enabled()
            except WebDriverException:  # stale, or "does not belong to the document" mid-load
                return True
            return False

        WebDriverWait(self.driver, WAIT_S).until(gone)
        self.wait(lambda: self.js("return document.readyState") == "complete", "the page to load")

    def submit_with(self, button: WebElement) -> None:
        """Click a submitting button and wait until the next page replaced this one."""
        old = self.find("html")
        button.click()
        self.replaced(old)

    def press(self, action: str, confirm: bool | None = None) -> str | None:
        """Press the campaign page's ``action`` button. ``confirm``: accept (True) or dismiss
        (False) the confirm it asks first; returns the confirm's text."""
        button = self.find(f"button.console-{action}")
        if confirm is None:
            self.submit_with(button)
            return None
        old = self.find("html")
        button.click()
        alert = WebDriverWait(self.driver, WAIT_S).until(expected_conditions.alert_is_present())
        assert alert is not False
        question = str(alert.text)
        if confirm:
            alert.accept()
            self.replaced(old)
        else:
            alert.dismiss()
        return question

    def fill(self, name: str, value: str) -> None:
        """Type into the form field ``name`` (long values are set at once, then an input event)."""
        field = self.find(f'[name="{name}"]')
        field.clear()
        if len(value) > 200:
            self.js(
                "arguments[0].value = arguments[1];"
                "arguments[0].dispatchEvent(new Event('input', {bubbles: true}));",
                field,
                value,
            )
        else:
            field.send_keys(value)

    def choose(self, name: str, value: str) -> None:
        """Pick ``value`` for the choice ``name``, whether a <select> or radio buttons."""
        fields = self.all(f'[name="{name}"]')
        assert fields, f"no field named {name!r} on {self.path}"
        if fields[0].tag_name == "select":
            Select(fields[0]).select_by_value(value)
            return
        [radio] = [f for f in fields if f.get_attribute("value") == value]
        self.js("arguments[0].scrollIntoView({block: 'center'});", radio)
        radio.click()

    # -- documentation ---------------------------------------------------------------------------
    def shot(self, name: str) -> Path | None:
        """With ``SCREENSHOTS=1``: save the whole page (up to 2,400 px tall) as
        docs/screenshots/<name>.png."""
        if os.environ.get("SCREENSHOTS") != "1":
            return None
        assert re.fullmatch(r"[a-z0-9-]+", name)
        size = self.driver.get_window_size()
        width, height = int(size["width"]), int(size["height"])
        full = int(self.js("return document.documentElement.scrollHeight;"))
        self.driver.set_window_size(width, min(max(full + 140, height), 2400))
        SHOTS.mkdir(parents=True, exist_ok=True)
        target = SHOTS / f"{name}.png"
        self.driver.save_screenshot(str(target))
        self.driver.set_window_size(width, height)
        return target
