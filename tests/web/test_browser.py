"""`agenvoy web` in a real browser: headless Chromium (Debian's chromium + chromium-driver)
driven by Selenium, against the real server on 127.0.0.1, over a home seeded with the real
models (vectors built, so semantic and hybrid searches are whole). Skipped only when
Chromium is absent outside CI (tests/web/browser.py). Every wait is bounded: the server's
start, each page load (browser.PAGE_LOAD). The module starts one Chromium, seeds one home and
runs one server per kind (read-only, --write): the tests that write each change a different
part of their home. The CLI's side of each check runs in this process with the session's
models (tests/web/seed.cli_here), as tests/conftest.py's `run` does."""

from __future__ import annotations

import contextlib
import functools
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import pytest

from tests.web import browser
from tests.web.seed import HUGE, SCRIPT, Viewer, cli_here, module_env, seed, viewers

# real processes (and a browser): out of the quick pre-commit run, in CI
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory, model_cache: Path,
           embedders: Any) -> Iterator[Path]:
    browser.require_chromium()
    home = tmp_path_factory.mktemp("web") / "home"
    with module_env(model_cache):
        seed(home, embedders)
    yield home


@pytest.fixture(scope="module")
def written(seeded: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home of its own for the tests that write (the seeded one stays as it was); each of
    them writes a different part of it (an error record, a message)."""
    home = tmp_path_factory.mktemp("web-written") / "home"
    shutil.copytree(seeded, home, symlinks=True)
    return home


@pytest.fixture(scope="module")
def servers(seeded: Path, written: Path, model_cache: Path) -> Iterator[list[Viewer]]:
    """The module's two `agenvoy web` (read-only, --write), started side by side in the
    environment a test would have."""
    with contextlib.ExitStack() as stack:
        with module_env(model_cache):
            started = stack.enter_context(viewers((seeded, ()), (written, ("--write",))))
        yield started


@pytest.fixture(scope="module")
def reader(servers: list[Viewer]) -> Viewer:
    return servers[0]


@pytest.fixture(scope="module")
def writer(servers: list[Viewer]) -> Viewer:
    return servers[1]


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One headless Chromium for the module (its start is most of a test's time)."""
    d = browser.start()
    try:
        yield d
    finally:
        browser.quit_browser(d)


@pytest.fixture
def driver(chromium: Any) -> Any:
    """The module's Chromium, as a fresh one would be: no cookie (no login), a blank page."""
    chromium.get("about:blank")
    chromium.execute_cdp_cmd("Network.clearBrowserCookies", {})
    return chromium


@pytest.fixture
def cli(embedders: Any) -> Any:
    """`agenvoy` run in this process with the session's models (tests/web/seed.cli_here)."""
    return functools.partial(cli_here, embedders)


def _css(d: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return d.find_elements(By.CSS_SELECTOR, selector)


def _after_click(d: Any, selector: str) -> Any:
    """The element `selector` of the page a click leads to (a click does not wait for the
    navigation it starts): waited for, at most browser.PAGE_LOAD seconds."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(d, browser.PAGE_LOAD, poll_frequency=0.1).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, selector)))


PAGES = ["/", "/s/main", "/s/hostile", "/context/main", "/search", "/errors", "/notes",
         "/notes/staging", "/health", "/search?q=deploy&mode=keyword&session=main"]


def test_every_page_loads_and_hostile_content_is_text(reader: Viewer, driver: Any) -> None:
    web = reader
    driver.get(web.url + "/")
    assert not [h for h in _css(driver, "h1") if h.text == "Sessions"]  # no token yet
    driver.get(web.login)  # the login link sets the cookie, then goes to the sessions
    assert _css(driver, "h1")[0].text == "Sessions"
    rows = {r.get_attribute("data-session") for r in _css(driver, "tr[data-session]")}
    assert rows == {"main", "hostile"}
    for page in PAGES:
        driver.get(web.url + page)
        heading = _css(driver, "h1")
        assert heading and heading[0].text != "Cannot show this", page
        assert not _css(driver, "form[method=post]"), page  # read-only: no write form
    driver.get(web.url + "/s/main")
    calls = _css(driver, "#archive .call")
    assert calls and "ls -l /var/www" in calls[0].text
    assert "drwxr-x---" in calls[0].find_element("css selector", ".result").text
    assert not _css(driver, "#archive article.role-tool")  # paired with its call
    assert _css(driver, "#archive details.reasoning")  # folded
    assert _css(driver, "#archive img.thumb")  # the data: image
    assert "[image: https://example.com/x.png]" in driver.page_source
    assert driver.execute_script(  # no remote image was fetched or even inserted
        "return [...document.images].every(i => i.src.startsWith('data:'))")
    driver.get(web.url + "/s/hostile")
    assert driver.title.startswith("hostile")  # the script never ran
    assert driver.execute_script("return document.scripts.length") == 0
    texts = [e.text for e in _css(driver, "#window pre.text")]
    assert SCRIPT in texts
    assert not [a for a in _css(driver, "a")
                if (a.get_attribute("href") or "").startswith("javascript:")]
    assert any("invoice⟦U+202E⟧gnp.exe" in t for t in texts)
    assert driver.execute_script(  # the huge line wraps: nothing wider than the page
        "return document.documentElement.scrollWidth <= window.innerWidth")
    assert "more characters not shown" in driver.page_source
    assert len(driver.page_source) < len(HUGE)


QUERIES = {"keyword": "permission denied", "semantic": "where do the database backups go",
           "hybrid": "deploy permission"}


def _hits_and_notes(driver: Any, url: str) -> tuple[list[tuple[str, int]], set[str]]:
    driver.get(url)
    hits = [(a.get_attribute("data-source"), int(a.get_attribute("data-seq")))
            for a in _css(driver, "#messages article.hit")]
    return hits, {p.get_attribute("data-code")
                  for p in _css(driver, "#messages p.note[data-code]")}


@pytest.mark.parametrize("mode", sorted(QUERIES))
def test_search_in_each_mode_finds_what_the_cli_finds(seeded: Path, reader: Viewer,
                                                      driver: Any, cli: Any,
                                                      mode: str) -> None:
    """The page lists the hits `agenvoy search --json` lists, in its order, with its notes
    (the floor's `not_related` when nothing is related closely enough), for a query with
    hits and one about nothing the home holds; notes searched the same way too."""
    web = reader
    driver.get(web.login)
    for query in (QUERIES[mode], "quantum chromodynamics lattice"):
        expected = orjson.loads(cli(seeded, "search", "main", query, "--mode", mode,
                                    "--json").stdout)
        want = [(r["source"], r["seq"]) for r in expected["results"] if r["hit"]]
        got, codes = _hits_and_notes(
            driver, f"{web.url}/search?q={quote(query)}&mode={mode}&session=main")
        assert got == want, (mode, query, got, want)
        assert codes == {n["code"] for n in expected["notes"]}, (mode, query)
        # nothing found: the page says why (the engine's note), or that nothing matched
        assert want or codes or "No message found." in _css(driver, "#messages")[0].text
        notes = orjson.loads(cli(seeded, "notes", "search", query, "--mode", mode,
                                 "--json").stdout)
        assert [a.get_attribute("data-note") for a in _css(driver, "#notes article.hit")] \
            == [h["name"] for h in notes["results"]]
        if mode == "hybrid":
            sides = [s.text for s in _css(driver, "#messages .side")]
            assert len(sides) == len(want)
            assert all(s.startswith("found by ") for s in sides)
    assert QUERIES[mode] and _hits_and_notes(
        driver, f"{web.url}/search?q={quote(QUERIES[mode])}&mode={mode}&session=main")[0]


def test_context_preview_is_what_agenvoy_context_prints(seeded: Path, reader: Viewer,
                                                        driver: Any, cli: Any) -> None:
    doc = orjson.loads(cli(seeded, "context", "main", "--json").stdout)
    web = reader
    driver.get(web.login)
    driver.get(web.url + "/context/main")
    shown = orjson.loads(_css(driver, "#messages")[0].text)
    assert shown == doc["messages"]
    assert int(_css(driver, "#bytes")[0].text) == len(orjson.dumps(doc["messages"]))


def test_edit_a_fix_with_write_then_the_cli_sees_it(written: Path, writer: Viewer,
                                                    driver: Any, cli: Any) -> None:
    home = written
    old = [r for r in orjson.loads(cli(home, "errors", "list", "--json").stdout)["records"]
           if r["tool_name"] == "bash"][0]
    web = writer
    driver.get(web.login)
    driver.get(web.url + "/errors")
    _css(driver, f"tr[data-record='{old['id']}'] a")[0].click()
    box = _after_click(driver, "textarea[name=action]")
    box.clear()
    box.send_keys("add the deploy user to www-data, then retry")
    _css(driver, "form.edit button")[0].click()
    assert "Replace the fix" in _after_click(driver, "p.question").text  # asked first
    _css(driver, "#confirm")[0].click()
    assert "replaced" in _after_click(driver, "p.done").text
    records = orjson.loads(cli(home, "errors", "list", "--tool", "bash", "--json").stdout)
    assert [(r["action"], r["symptom"], r["cause"], r["outcome"])
            for r in records["records"]] == [("add the deploy user to www-data, then retry",
                                              old["symptom"], old["cause"], old["outcome"])]
    assert cli(home, "errors", "show", old["id"]).returncode == 3  # the old one is gone


def test_forget_a_message_removes_it_from_every_layer(written: Path, writer: Viewer,
                                                      driver: Any, cli: Any) -> None:
    home = written
    text = "The screenshot shows the permission error"
    seq = [r for r in orjson.loads(cli(home, "search", "main", "screenshot shows", "--mode",
                                       "keyword", "--json").stdout)["results"]
           if r["hit"]][0]["seq"]
    web = writer
    driver.get(web.login)
    driver.get(web.url + "/s/main")
    _css(driver, f"article[data-seq='{seq}'] a.action")[0].click()
    _after_click(driver, "table.layers")
    layers = [e.text for e in _css(driver, "table.layers th")]
    assert layers[:3] == ["history.json", "history.db (archive and both full-text indexes)",
                          "vector index"]
    assert text in _css(driver, "article[data-seq] pre")[0].text
    _css(driver, "#confirm")[0].click()
    assert "1 message(s) forgotten" in _after_click(driver, "p.done").text
    assert text.encode() not in (home / "sessions" / "main" / "history.json").read_bytes()
    with sqlite3.connect(f"file:{home / '.store' / 'history.db'}?mode=ro", uri=True) as conn:
        assert not conn.execute("SELECT count(*) FROM messages WHERE content LIKE ?",
                                (f"%{text}%",)).fetchone()[0]
    for mode in ("keyword", "semantic", "hybrid"):
        doc = orjson.loads(cli(home, "search", "main", text, "--mode", mode, "--json").stdout)
        assert all(text not in r["content"] for r in doc["results"]), mode
    doctor = cli(home, "doctor", "--json")
    assert doctor.returncode == 0, doctor.stdout
