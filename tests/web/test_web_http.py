"""`agenvoy web` over real HTTP (the server a user runs, on 127.0.0.1): who may read it
(token, Host, Origin), that no write route exists without --write, that writes need their
CSRF token and confirmation, and that hostile content is sent as inert text. Every wait is
bounded (the viewer helper's start timeout, http.client's timeout, subprocess timeouts).
One small home and one server per kind (read-only, --write) serve the module."""

from __future__ import annotations

import contextlib
import functools
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.web.seed import (
    HUGE,
    JS_LINK,
    ROOT,
    RTL,
    SCRIPT,
    Viewer,
    cli_here,
    module_env,
    request,
    viewers,
)

# real processes (and a browser): out of the quick pre-commit run, in CI
pytestmark = pytest.mark.slow


def small_home(cli: Callable[..., Any], home: Path) -> None:
    """A home without vectors (quick): two sessions, one of them hostile, a record, a note."""
    for args in (("append", "main", "--role", "user", "--content", "deploy failed on staging"),
                 ("append", "main", "--role", "assistant", "--content", "check the deploy user"),
                 ("append", "hostile", "--role", "user", "--content", SCRIPT),
                 ("append", "hostile", "--role", "assistant", "--content", JS_LINK),
                 ("append", "hostile", "--role", "user", "--content", RTL),
                 ("errors", "record", "--tool", "bash", "-k", "deploy", "--symptom",
                  "permission denied", "--action", "use sudo", "--outcome", "resolved",
                  "--no-semantic"),
                 ("notes", "add", "staging", "--content", "Staging runs on host blue-7.")):
        res = cli(home, *args)
        assert res.returncode == 0, (args, res.stderr)
    res = cli(home, "append", "hostile", "--role", "assistant", "--content", "-", input=HUGE)
    assert res.returncode == 0, res.stderr


def state(cli: Callable[..., Any], home: Path) -> dict[str, object]:
    """What a write would change, as the CLI reads it."""
    errors = cli(home, "errors", "list", "--json")
    notes = cli(home, "notes", "list", "--json")
    return {"history": (home / "sessions" / "main" / "history.json").read_bytes(),
            "errors": [(r["id"], r["action"]) for r in _json(errors.stdout)["records"]],
            "notes": [n["name"] for n in _json(notes.stdout)["knowledge_notes"]]}


def _json(text: str) -> dict:
    import orjson

    return orjson.loads(text)


@pytest.fixture
def cli(embedders: Any) -> Any:
    """`agenvoy` run in this process with the session's models (tests/web/seed.cli_here)."""
    return functools.partial(cli_here, embedders)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory, model_cache: Path, embedders: Any) -> Path:
    """small_home once for the module; the tests that read share it, and its server."""
    home = tmp_path_factory.mktemp("web-small") / "home"
    with module_env(model_cache):
        small_home(functools.partial(cli_here, embedders), home)
    return home


@pytest.fixture(scope="module")
def read_home(small: Path) -> Path:
    """The small home, plus what other programs may leave in one: a history.json with
    invalid UTF-8 (raw bytes, a lone surrogate), and an archived row Agenvoy (in Go) wrote
    with invalid UTF-8. Only read by the tests (the server has no --write)."""
    home = small.parent / "read"
    shutil.copytree(small, home, symlinks=True)
    for name, data in (("rawbytes", b'[{"role":"user","content":"caf\xc3 au \xff lait"}]'),
                       ("surrogate", b'[{"role":"user","content":"caf\\udcff lait"}]')):
        (home / "sessions" / name).mkdir(parents=True)
        (home / "sessions" / name / "history.json").write_bytes(data)
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        changed = conn.execute("UPDATE messages SET content = CAST(? AS TEXT), message = NULL "
                               "WHERE session_id = 'main' AND seq = 0",
                               (b"deploy caf\xc3 \xff failed",)).rowcount
        assert changed == 1
    return home


@pytest.fixture(scope="module")
def write_home(small: Path) -> Path:
    """A copy of the small home for the --write tests; each writes a different part of it
    (the error record, a note of its own)."""
    home = small.parent / "write"
    shutil.copytree(small, home, symlinks=True)
    return home


@pytest.fixture(scope="module")
def servers(read_home: Path, write_home: Path, model_cache: Path) -> Iterator[list[Viewer]]:
    """The module's two `agenvoy web` (read-only, --write), started side by side in the
    environment a test would have."""
    with contextlib.ExitStack() as stack:
        with module_env(model_cache):
            started = stack.enter_context(viewers((read_home, ()), (write_home, ("--write",))))
        yield started


@pytest.fixture(scope="module")
def reader(servers: list[Viewer]) -> Viewer:
    return servers[0]


@pytest.fixture(scope="module")
def writer(servers: list[Viewer]) -> Viewer:
    return servers[1]


def test_token_host_and_origin_are_checked_before_anything_is_read(reader: Viewer) -> None:
    web = reader
    port = urlsplit(web.url).port
    ok = {"Authorization": f"Bearer {web.token}"}
    status, _, body = request(web.url, "/", headers=ok)
    assert status == 200 and b"data-session=\"main\"" in body
    for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"},
                    {"Authorization": f"Basic {web.token}"},
                    {"Cookie": "agenvoy_web=0123abcd"},
                    {"Cookie": f"agenvoy_web={web.token}"}):  # the token is not the cookie
        status, got, body = request(web.url, "/", headers=headers)
        assert status == 401, headers
        assert b"main" not in body and got.get("www-authenticate")
    status, _, _ = request(web.url, "/login?token=wrong", headers={})
    assert status == 401
    for host in ("evil.com", f"127.0.0.1:{port}@evil.com", f"localhost:{port}.evil.com",
                 "127.0.0.1", f"127.0.0.1:{port + 1}"):
        status, _, body = request(web.url, "/", headers={**ok, "Host": host})
        assert status == 421, host
        assert b"main" not in body
    for origin in ("http://evil.com", f"http://127.0.0.1:{port}.evil.com", "null"):
        status, _, _ = request(web.url, "/", headers={**ok, "Origin": origin})
        assert status == 403, origin
    status, _, _ = request(web.url, "/", headers={**ok, "Origin": f"http://localhost:{port}",
                                                  "Host": f"localhost:{port}"})
    assert status == 200
    # the login link: a cookie holding a value derived from the token, never the token
    status, got, _ = request(web.url, f"/login?token={web.token}")
    assert status == 303 and got["location"] == "/"
    cookie = got["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert web.token not in cookie
    status, _, body = request(web.url, "/", headers={"Cookie": cookie.split(";")[0]})
    assert status == 200 and b"data-session=\"main\"" in body


WRITES = [("GET", "/notes-new"), ("POST", "/notes-new"), ("GET", "/forget/main?seq=0"),
          ("POST", "/forget/main"), ("GET", "/errors/{rid}/edit"),
          ("POST", "/errors/{rid}/edit"), ("POST", "/errors/{rid}/forget"),
          ("GET", "/notes/staging/edit"), ("POST", "/notes/staging/edit"),
          ("POST", "/notes/staging/remove")]


def test_no_write_route_exists_without_write(read_home: Path, reader: Viewer,
                                             cli: Any) -> None:
    home = read_home
    rid = _json(cli(home, "errors", "list", "--json").stdout)["records"][0]["id"]
    before = state(cli, home)
    web = reader
    auth = {"Authorization": f"Bearer {web.token}",
            "Content-Type": "application/x-www-form-urlencoded"}
    form = b"confirm=yes&seq=0&action=x&outcome=resolved&content=x&name=x"
    for method, path in WRITES:
        status, _, body = request(web.url, path.format(rid=rid), method=method,
                                  headers=auth, body=form if method == "POST" else None)
        assert status in (404, 405), (method, path, status)
    for page in ("/errors", "/notes", "/notes/staging", "/s/main"):
        status, _, body = request(web.url, page, headers=auth)
        assert status == 200 and b'method="post"' not in body, page
    assert state(cli, home) == before


def test_writes_need_the_csrf_token_and_a_confirmation(write_home: Path, writer: Viewer,
                                                       cli: Any) -> None:
    home = write_home
    rid = _json(cli(home, "errors", "list", "--json").stdout)["records"][0]["id"]
    before = state(cli, home)
    web = writer
    auth = {"Authorization": f"Bearer {web.token}",
            "Content-Type": "application/x-www-form-urlencoded"}
    _, _, page = request(web.url, "/errors", headers=auth)
    csrf = re.search(rb'name="csrf" value="([0-9a-f]+)"', page).group(1).decode()
    for path, form in ((f"/errors/{rid}/forget", "confirm=yes"),
                       ("/forget/main", "confirm=yes&seq=0"),
                       ("/notes/staging/remove", "confirm=yes")):
        wrong = csrf[:-1] + ("1" if csrf.endswith("0") else "0")  # one character off
        for token in ("", "&csrf=0123", f"&csrf={wrong}"):
            status, _, _ = request(web.url, path, method="POST", headers=auth,
                                   body=(form + token).encode())
            assert status == 403, (path, token)
        # with the token but without confirm=yes: asked, nothing done
        status, _, body = request(web.url, path, method="POST", headers=auth,
                                  body=f"csrf={csrf}&seq=0".encode())
        assert status == 200 and b'name="confirm" value="yes"' in body
    assert state(cli, home) == before
    # a form from another site is refused by its Origin before its fields are read
    status, _, _ = request(web.url, f"/errors/{rid}/forget", method="POST",
                           headers={**auth, "Origin": "http://evil.example"},
                           body=f"confirm=yes&csrf={csrf}".encode())
    assert status == 403
    assert state(cli, home) == before
    status, _, body = request(web.url, f"/errors/{rid}/forget", method="POST",
                              headers=auth, body=f"confirm=yes&csrf={csrf}".encode())
    assert status == 200 and b"forgotten" in body
    assert state(cli, home)["errors"] == []


def test_hostile_content_is_sent_as_inert_text(reader: Viewer) -> None:
    """Over read_home: its hostile session, and what other programs wrote with invalid
    UTF-8 there (a history.json, an archived row)."""
    web = reader
    auth = {"Authorization": f"Bearer {web.token}"}
    status, _, body = request(web.url, "/s/main", headers=auth)
    assert status == 200 and "deploy caf\ufffd \ufffd failed" in body.decode("utf-8")
    status, headers, body = request(web.url, "/s/hostile", headers=auth)
    assert status == 200
    html = body.decode("utf-8")  # valid UTF-8, whatever the home holds
    assert "script-src" not in headers["content-security-policy"]  # no script at all
    assert "default-src 'none'" in headers["content-security-policy"]
    assert "<script" not in html.lower()
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in html
    assert 'href="javascript:' not in html and "href=javascript:" not in html
    assert "&lt;a href=&#34;javascript:alert(1)&#34;&gt;click me&lt;/a&gt;" in html
    assert "\u202e" not in html and "invoice⟦U+202E⟧gnp.exe" in html
    assert len(body) < len(HUGE)  # the huge line is cut, and says so
    assert f"({len(HUGE) - 20_000} more characters not shown)" in html
    for name in ("rawbytes", "surrogate"):
        status, _, body = request(web.url, f"/s/{name}", headers=auth)
        text = body.decode("utf-8")
        assert status in (200, 500) and "is not valid JSON" in text, name
        assert "Traceback" not in text
    status, _, body = request(web.url, "/", headers=auth)
    assert status == 200 and b'data-session="rawbytes"' in body
    # the query is hostile too: invalid UTF-8 and markup in the URL
    status, _, body = request(web.url, "/search?q=%FF%FE%3Cscript%3Ex%3C/script%3E"
                              "&mode=keyword&session=main", headers=auth)
    text = body.decode("utf-8")
    assert status == 200 and "<script>x" not in text and "&lt;script&gt;x" in text


def test_a_refused_start_writes_nothing(home: Path, tmp_path: Path) -> None:
    """Three refused starts, as real processes run side by side (each one bounded)."""
    import os

    env = {**os.environ, "AGENVOY_HOME": str(home), "AGENVOY_NO_SERVER": "1"}
    procs = [subprocess.Popen([sys.executable, "-m", "agenvoy_cli", "web", *args], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
             for args in (("--listen", "0.0.0.0:0"), ("--listen", "nonsense"),
                          ("--allow-host", "*.evil"))]
    try:
        done = [(p.communicate(timeout=60)[1], p.returncode) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
    assert done[0][1] == 2 and "beyond loopback" in done[0][0]
    assert done[1][1] == 2
    assert done[2][1] == 2
    assert not home.exists()
    shutil.rmtree(tmp_path / "nothing", ignore_errors=True)


def test_bad_requests_are_one_line_pages(reader: Viewer) -> None:
    web = reader
    status, _, body = request(web.url, "/s/..%2F..%2Fetc", headers={
        "Authorization": f"Bearer {web.token}"})
    assert status == 404 and b"Traceback" not in body
    for path in ("/s/nosuch", "/context/nosuch", "/notes/nosuch", "/s/a%20b",
                 "/search?q=x&mode=fuzzy", "/s/main?before=-5"):
        status, _, body = request(web.url, path, headers={"Authorization":
                                                          f"Bearer {web.token}"})
        assert status in (400, 404), (path, status)
        assert b'class="failure"' in body and b"Traceback" not in body


def test_notes_add_edit_remove_with_write_as_the_cli_sees_them(write_home: Path,
                                                               writer: Viewer,
                                                               cli: Any) -> None:
    home = write_home
    web = writer
    auth = {"Authorization": f"Bearer {web.token}",
            "Content-Type": "application/x-www-form-urlencoded"}
    _, _, page = request(web.url, "/notes-new", headers=auth)
    csrf = re.search(rb'name="csrf" value="([0-9a-f]+)"', page).group(1).decode()

    def post(path: str, form: str) -> bytes:
        asked = request(web.url, path, method="POST", headers=auth,
                        body=f"csrf={csrf}&{form}".encode())
        assert asked[0] == 200 and b'name="confirm" value="yes"' in asked[2], path
        done = request(web.url, path, method="POST", headers=auth,
                       body=f"csrf={csrf}&confirm=yes&{form}".encode())
        assert done[0] == 200 and b'class="done"' in done[2], (path, done[2][-400:])
        return done[2]

    post("/notes-new", "name=oncall&content=Pager+rota%3A+week+1+Ana")
    assert "Pager rota: week 1 Ana" in cli(home, "notes", "show", "oncall").stdout
    post("/notes/oncall/edit", "name=oncall&content=Pager+rota%3A+week+1+Bo")
    assert "week 1 Bo" in cli(home, "notes", "show", "oncall").stdout
    post("/notes/oncall/remove", "")
    assert cli(home, "notes", "show", "oncall").returncode == 3
    # a bad note is the page's one line, and nothing is written
    status, _, body = request(web.url, "/notes-new", method="POST", headers=auth,
                              body=f"csrf={csrf}&confirm=yes&name=a/b&content=x".encode())
    assert status == 400 and b'class="failure"' in body
    assert "a/b" not in cli(home, "notes", "list").stdout
