"""The matrix page's selector, in a real headless browser (Debian's chromium through selenium's
chromedriver client): for 60 inputs of its grid the page shows the row `verl-setup plan --json`
chooses for the same inputs, run as a program. The page only looks answers up; this is the test
that holds the lookup to the real selection. A screenshot lands in build/site/."""

from __future__ import annotations

import functools
import http.server
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docs_task import gen_docs

ROOT = Path(__file__).parents[2]
SITE = ROOT / "build" / "site"
SCREENSHOT = SITE / "matrix-selector.png"
SAMPLE = 60
pytestmark = [pytest.mark.slow, pytest.mark.subprocess]


def _need(found: object, what: str, how: str) -> None:
    if not found:
        if os.environ.get("CI"):
            pytest.fail(f"{what} is missing ({how}; .ci/run installs it)")
        pytest.skip(f"{what} is missing ({how})")


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    """build/site served on 127.0.0.1 (built with mkdocs --strict when `make docs` has not)."""
    _need(shutil.which("mkdocs", path=str(Path(sys.executable).parent)), "mkdocs", "pip install -e '.[docs]'")
    if not (SITE / "matrix" / "index.html").is_file():
        subprocess.run(
            [str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "--quiet"],
            cwd=ROOT,
            check=True,
        )
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/matrix/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    _need(shutil.which("chromium"), "chromium", "apt-get install chromium")
    _need(shutil.which("chromedriver"), "chromedriver", "apt-get install chromium-driver")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service  # noqa: PLC0415

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or ""
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
        "--window-size=1280,1700",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def choose(driver: Any, inputs: dict[str, str]) -> dict[str, str]:
    """Pick the inputs in the page's selects as a user would; what the answer box then says."""
    from selenium.webdriver.common.by import By  # noqa: PLC0415
    from selenium.webdriver.support.ui import Select  # noqa: PLC0415

    def pick(name: str, value: str) -> None:
        Select(driver.find_element(By.ID, f"sel-{name}")).select_by_value(value)

    if inputs["driver"] == "none":
        pick("driver", "none")  # the sm select is then disabled: a CPU host has none
    else:
        pick("driver", inputs["driver"])
        pick("sm", inputs["sm"])
    for name in ("arch", "glibc", "python", "engine", "backend"):
        pick(name, inputs[name])
    box = driver.find_element(By.ID, "answer")
    install = box.find_elements(By.ID, "answer-install")
    return {
        "key": box.get_attribute("data-key"),
        "row": box.get_attribute("data-row"),
        "install": install[0].text if install else "",
        "plan": box.find_element(By.ID, "answer-plan").text,
        "text": box.text,
    }


def plan_json(argv: list[str]) -> tuple[str, str | None]:
    """`verl-setup plan --json` as a program: (row id or "none", exact Python)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERL_SETUP_")}
    result = subprocess.run(
        [sys.executable, "-m", "verl_setup", *argv, "--json", "-q"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    envelope = json.loads(result.stdout)
    if result.returncode == 3:
        return "none", None
    assert result.returncode == 0, result.stderr
    return envelope["data"]["row"]["id"], envelope["data"]["python"]


def sample() -> list[dict[str, str]]:
    """60 inputs: one for each row the grid reaches (and "no row") first, then a fixed draw."""
    task = gen_docs()
    inputs = list(task.grid_inputs())
    grid = json.loads(task.GRID_FILE.read_text(encoding="utf-8").split("= ", 1)[1].rstrip().rstrip(";"))
    by_row: dict[str | None, dict[str, str]] = {}
    for one in inputs:
        by_row.setdefault(grid["answers"][grid["keys"][task.grid_key(one)]]["row"], one)
    picked = list(by_row.values())[:SAMPLE]
    rest = [i for i in inputs if i not in picked]
    return picked + random.Random(33).sample(rest, SAMPLE - len(picked))  # noqa: S311  # a fixed draw


def test_the_page_chooses_what_plan_json_chooses_for_60_inputs(site: str, browser: Any) -> None:
    from verl_setup.cli import parse  # noqa: PLC0415

    task = gen_docs()
    browser.get(site)
    assert "verl-setup" in browser.title
    compared, rows_seen = 0, set()
    for inputs in sample():
        shown = choose(browser, inputs)
        assert shown["key"] == task.grid_key(inputs)
        assert shown["plan"] == "verl-setup " + shlex.join(task.plan_argv(inputs))
        row, python = plan_json(task.plan_argv(inputs))
        assert shown["row"] == row, (inputs, shown["text"])
        if row != "none":
            argv = shown["install"].split()
            assert argv[:4] == ["verl-setup", "install", "--row", row], shown["install"]
            assert argv[-2:] == ["--python", python]
            parse(argv[1:])  # the line the page shows is a real command line
        compared += 1
        rows_seen.add(row)
    assert compared >= 50
    assert len(rows_seen) >= 8, rows_seen  # rows of several verl lines, CPU, aarch64, Megatron, none


def test_a_screenshot_of_the_selector_with_an_h100_host(site: str, browser: Any) -> None:
    from selenium.webdriver.common.by import By  # noqa: PLC0415

    browser.get(site)
    inputs = {"driver": "570.86.10", "sm": "9.0", "arch": "x86_64", "glibc": "2.35", "python": "3.12"}
    shown = choose(browser, {**inputs, "engine": "any", "backend": "fsdp"})
    assert shown["row"] == plan_json(gen_docs().plan_argv({**inputs, "engine": "any", "backend": "fsdp"}))[0]
    heading = browser.find_element(By.ID, "which-row-is-mine")  # below the sticky header
    browser.execute_script(
        "window.scrollTo(0, arguments[0].getBoundingClientRect().top + window.scrollY - 60);", heading
    )
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(SCREENSHOT))
    assert SCREENSHOT.stat().st_size > 10_000
