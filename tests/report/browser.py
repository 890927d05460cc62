"""One headless Chromium (Debian's `chromium` driven through `chromium-driver` by selenium) for the report
tests: a page's console messages, its sections, link clicks and per-section screenshots."""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webelement import WebElement

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WINDOW = (1400, 1000)


@contextmanager
def chromium(profile: Path) -> Iterator[webdriver.Chrome]:
    """A headless Chromium with its console log readable; the system driver, so selenium fetches nothing."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={WINDOW[0]},{WINDOW[1]}", "--force-device-scale-factor=1",
                f"--user-data-dir={profile}", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=shutil.which(CHROMEDRIVER)
                                                               or CHROMEDRIVER))
    try:
        # Chromium's own start page may log (e.g. "Slow network is detected" on a loaded machine):
        # only what the report's page says is checked, so that is drained first.
        driver.get("about:blank")
        driver.get_log("browser")
        yield driver
    finally:
        driver.quit()


@dataclass(frozen=True)
class Shot:
    path: Path
    size: tuple[int, int]
    expected: tuple[int, int]
    colours: int  # distinct colours in the image (1: blank)


def screenshot(element: WebElement, path: Path) -> Shot:
    """The element's screenshot written to `path`, with what the test checks: size and content."""
    png = element.screenshot_as_png
    path.write_bytes(png)
    image = Image.open(io.BytesIO(png)).convert("RGB")
    rect = element.rect
    expected = (round(rect["width"]), round(rect["height"]))
    colours = image.getcolors(maxcolors=1 << 16)
    return Shot(path, image.size, expected, len(colours) if colours is not None else 1 << 16)
