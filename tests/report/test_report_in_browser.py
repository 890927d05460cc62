"""The demo's report opened in a real headless browser (Debian's chromium + chromium-driver, selenium): it
loads with no console message and fetches nothing, every section is there and says something, the links
between sections land on their targets, and each section's screenshot (under the run's state directory) is
the section's size and not blank. One browser session for all of it."""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from report import SECTIONS
from tests.demo_run import DemoRun
from tests.report.browser import WINDOW, chromium, screenshot

pytestmark = pytest.mark.tools("chromium", "chromedriver")

IN_VIEW_JS = "const r = document.getElementById(arguments[0]).getBoundingClientRect(); return [r.top, innerHeight];"
BROKEN_LINKS_JS = ("return [...document.querySelectorAll('a[href^=\"#\"]')].map(a => a.getAttribute('href').slice(1))"
                   ".filter(id => !document.getElementById(id));")


def report_of(demo: DemoRun) -> Path:
    path = demo.site.parent / "state" / "lab" / "report" / "report.html"
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert str(path) in "".join(demo.stdout.split()), "the demo prints the report's path"
    assert path.is_file()
    return path


def _click(driver, css: str) -> None:  # type: ignore[no-untyped-def]
    """Click as a reader does: the link in the middle of the window, not under the sticky header."""
    link = driver.find_element(By.CSS_SELECTOR, css)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", link)
    link.click()


def _landed(driver, target: str) -> bool:  # type: ignore[no-untyped-def]
    top, height = driver.execute_script(IN_VIEW_JS, target)
    return bool(driver.current_url.endswith(f"#{target}") and -2 <= top < height)


def test_the_demo_report_loads_clean_links_work_and_every_section_has_a_screenshot(demo_run: DemoRun,
                                                                                   tmp_path: Path) -> None:
    page = report_of(demo_run)
    shots_dir = page.parent / "screenshots"
    shots_dir.mkdir(exist_ok=True)
    with chromium(tmp_path / "profile") as driver:
        driver.get(page.as_uri())
        assert driver.title == "Bring-up report: sim"
        assert driver.get_log("browser") == [], "no console message at all"
        assert driver.execute_script("return performance.getEntriesByType('resource').length") == 0

        for sid, title in SECTIONS:
            section = driver.find_element(By.ID, sid)
            assert section.find_element(By.TAG_NAME, "h2").text.startswith(title)
            assert len(section.text) > 60, f"section {sid} says too little: {section.text!r}"
        figures = {sid: len(driver.find_elements(By.CSS_SELECTOR, f"#{sid} svg")) for sid, _ in SECTIONS}
        assert figures["funnel"] == 2 and figures["fabric"] == figures["health"] == figures["burnin"] == 1
        assert figures["training"] == 2, "the demo's loss and MFU curves"
        assert driver.find_elements(By.CSS_SELECTOR, "#training table.restarts a[href^='#host-']")
        assert driver.find_elements(By.CSS_SELECTOR, "#fabric line.link-disabled")
        assert driver.find_elements(By.CSS_SELECTOR, "#fabric line.link-fail")
        assert driver.find_elements(By.CSS_SELECTOR, "#health rect.cell-critical")
        assert driver.execute_script(BROKEN_LINKS_JS) == []

        for sid, _ in SECTIONS:
            _click(driver, f'nav a[href="#{sid}"]')
            assert _landed(driver, sid), f"nav link to {sid}"
        _click(driver, "#failed table a[href='#host-gpu-r1-03']")
        assert _landed(driver, "host-gpu-r1-03")
        _click(driver, "#host-gpu-r1-03 a[href='#health']")
        assert _landed(driver, "health")
        _click(driver, "#health svg a[href='#host-gpu-r1-03']")
        assert _landed(driver, "host-gpu-r1-03")

        # A window as tall as the page: every section is whole on screen, so its screenshot is all of it.
        driver.set_window_size(WINDOW[0], driver.execute_script("return document.body.scrollHeight") + 200)
        driver.execute_script("window.scrollTo(0, 0)")
        for sid, _ in SECTIONS:
            shot = screenshot(driver.find_element(By.ID, sid), shots_dir / f"{sid}.png")
            assert shot.path.stat().st_size > 2000
            assert abs(shot.size[0] - shot.expected[0]) <= 2 and abs(shot.size[1] - shot.expected[1]) <= 2, shot
            assert shot.size[1] >= 80 and shot.colours > 16, f"{sid} screenshot looks blank: {shot}"
        assert driver.get_log("browser") == []
