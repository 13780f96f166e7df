"""The embedding rate remembered in the home (issue #51 item 7; search/catchup.py Pacer.recall,
Layout.embed_rates): a fresh process (every CLI search is one) sizes its first budgeted batch
from the rate measured before instead of a probe. A hint only: a file that is not what the
writer writes is ignored, a failed write loses only the hint, and two processes writing at
once leave a whole file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests import words_embedder
from tests.helpers.catchup import CharClock, append

ROOT = Path(__file__).resolve().parent.parent


class Batches(CharClock):
    """CharClock that records each batch's texts' lengths."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[int]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.batches.append([len(t) for t in texts])
        return super().embed_documents(texts)


def _rates_file(home: Path) -> Path:
    return home / ".store" / "embed-rates.json"


def _long_messages(run, tmp_path: Path, n: int = 400) -> None:
    long = [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"long turn {i}: " + "the weather and lunch plans again " * 60}
            for i in range(n)]
    path = tmp_path / "long.json"
    path.write_text(json.dumps(long))
    assert run("append", "s", "--messages", str(path)).exit_code == 0


@pytest.fixture
def clock(monkeypatch) -> Batches:
    import types

    from agenvoy_cli.search import catchup

    emb = Batches()
    words_embedder.use(monkeypatch, emb)
    monkeypatch.setattr(catchup, "time", types.SimpleNamespace(monotonic=emb.monotonic))
    return emb


def test_a_fresh_search_takes_the_remembered_rate_instead_of_a_probe(run, home, clock,
                                                                     tmp_path) -> None:
    """`backfill --vectors` remembers the rate it measured; the next `search --budget 10`
    after 400 long messages (a new Pacer, as in a fresh process) embeds no probe: its first
    batch is whole messages, at most HINT_SHARE of what is left at the remembered rate
    (the machine may be busier now), and all its embedding stays within the budget plus
    one text. Before, every fresh process spent a probe (300 characters) learning it."""
    from agenvoy_cli.search import catchup

    append(run, "s", 40, tmp_path)
    assert run("backfill", "s", "--vectors").exit_code == 0
    rates = catchup.read_rates(_rates_file(home))
    assert set(rates) == {clock.model_id}
    assert 0.5 * CharClock.per_char < rates[clock.model_id] <= CharClock.per_char
    _long_messages(run, tmp_path)
    clock.batches, clock.charged, clock.costs = [], 0.0, []
    res = run("search", "s", "Mochi vacuum", "--budget", "10", "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    first = clock.batches[0]  # each text costs 1 s, the remembered rate says ~0.6 s
    assert catchup.PROBE_CHARS not in first and len(first) > 1, clock.batches
    assert 0 < doc["indexed"] < 400
    assert clock.charged <= 10.0 + max(clock.costs), clock.charged


@pytest.mark.parametrize("content", [
    b"", b"{", b"\xff\xfe garbage", b"null", b"[1, 2]", b'{"rates": {"m": 0.001}}',
    b'{"version": 2, "rates": {"m": 0.001}}', b'{"version": 1, "rates": [0.001]}',
    b'{"version": 1, "rates": {"m": -0.001, "n": 0, "o": "fast", "p": true, "q": 1e9,'
    b' "r": null}}',
    b'{"version": 1, "rates": {"m": 0.00',  # cut short
])
def test_a_rate_file_not_written_by_agenvoy_is_ignored(home, content) -> None:
    from agenvoy_cli.search import catchup

    path = _rates_file(home)
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    assert catchup.read_rates(path) == {}


def test_only_the_sound_entries_of_a_rate_file_are_taken(home) -> None:
    from agenvoy_cli.search import catchup

    path = _rates_file(home)
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"version": 1, "rates": {"good": 0.0002, "bad": -1, "worse": "x"}}')
    assert catchup.read_rates(path) == {"good": 0.0002}


@pytest.mark.parametrize("what", ["corrupt", "directory", "symlink"])
def test_a_search_over_a_bad_rate_file_still_answers(run, home, clock, tmp_path,
                                                     what) -> None:
    """A corrupt rate file is ignored and replaced by a measured one; a directory or a
    symlink in its place is left alone (no hint): the search answers either way."""
    from agenvoy_cli.search import catchup

    append(run, "s", 40, tmp_path)
    path = _rates_file(home)
    outside = tmp_path / "outside.json"
    outside.write_bytes(b"{}")
    if what == "corrupt":
        path.write_bytes(b'{"version": 1, "rates": {"x": 0.00')
    elif what == "directory":
        path.mkdir()
    else:
        path.symlink_to(outside)
    res = run("search", "s", "Mochi vacuum", "--budget", "30", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["indexed"] == 40
    if what == "corrupt":
        assert clock.model_id in catchup.read_rates(path)
    elif what == "directory":
        assert path.is_dir()
    else:
        assert path.is_symlink() and outside.read_bytes() == b"{}"


def _rates_write_at(run, home: Path, tmp_path: Path) -> int:
    """Which `write` point of the search is the rate file's first: counted on a copy of
    the home (home/faults.py's log), then the home put back."""
    import shutil

    from agenvoy_cli.home import faults

    kept, log = tmp_path / "kept-home", tmp_path / "points.log"
    shutil.copytree(home, kept, symlinks=True)
    with faults.armed(faults.parse(f"point=write,log={log}")):
        assert run("search", "s", "Mochi vacuum", "--budget", "30", "--json").exit_code == 0
    shutil.rmtree(home)
    shutil.move(kept, home)
    lines = [line.split(" ", 2) for line in log.read_text().splitlines()]
    return next(int(n) for n, _, what in lines if "embed-rates" in what)


@pytest.mark.parametrize("fail", ["enospc", "eio"])
def test_a_failed_write_of_the_rate_loses_only_the_hint(run, home, clock, tmp_path,
                                                        fail) -> None:
    """A full or failing disk at the rate file's write (home/faults.py): the search
    answers, the old file stands, no temp file is left."""
    from agenvoy_cli.home import faults
    from agenvoy_cli.search import catchup

    append(run, "s", 40, tmp_path)
    path = _rates_file(home)
    path.write_bytes(b'{"version": 1, "rates": {"other": 0.0001}}\n')
    with faults.armed(faults.parse(f"point=write,fail={fail},at=1")) as plan:
        catchup.write_rates(path, {"m": 0.0003})  # never raises
    assert plan.fired
    at = _rates_write_at(run, home, tmp_path)
    # (once: the disk full at that write only; a disk that stays full fails the search's
    # later writes, the kept vectors, as it did before the rates were remembered)
    with faults.armed(faults.parse(f"point=write,fail={fail},at={at},once=1")) as plan:
        res = run("search", "s", "Mochi vacuum", "--budget", "30", "--json")
    assert plan.fired
    assert res.exit_code == 0, res.stderr
    assert res.json()["indexed"] == 40 and res.json()["results"]
    assert path.read_bytes() == b'{"version": 1, "rates": {"other": 0.0001}}\n'
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_failed_rename_of_the_rate_file_loses_only_the_hint(home) -> None:
    from agenvoy_cli.home import faults
    from agenvoy_cli.search import catchup

    path = _rates_file(home)
    catchup.write_rates(path, {"m": 0.0003})
    with faults.armed(faults.parse("point=rename,fail=eio,at=1")):
        catchup.write_rates(path, {"m": 0.0009})
    assert catchup.read_rates(path) == {"m": 0.0003}
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


WRITER = """
import sys
from pathlib import Path
from agenvoy_cli.search.catchup import write_rates
path, name = Path(sys.argv[1]), sys.argv[2]
for i in range(1, 151):
    write_rates(path, {name: i * 1e-6})
"""


def test_two_processes_writing_the_rates_at_once_leave_a_whole_file(home) -> None:
    """Two processes remembering their rates at once, a reader meanwhile: the reader sees
    no file or a whole one, never a torn one; the last file is whole and holds only
    rates the writers wrote (one may have taken the other's older value: a hint)."""
    from agenvoy_cli.search import catchup

    path = _rates_file(home)
    path.parent.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), name], env=env,
                              cwd=ROOT) for name in ("a", "b")]
    seen = 0
    try:
        while any(p.poll() is None for p in procs):
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            doc = orjson.loads(data)  # a torn file would not parse
            assert doc["version"] == catchup.RATES_VERSION
            seen += 1
    finally:
        for p in procs:
            assert p.wait(timeout=120) == 0
    rates = catchup.read_rates(path)
    assert rates and set(rates) <= {"a", "b"}
    assert all(v in {i * 1e-6 for i in range(1, 151)} for v in rates.values())
    assert seen > 0
