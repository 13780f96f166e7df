"""Progress lines say something true: off a terminal (stderr), `backfill --vectors` counts
the messages it embeds, at a rate in messages per second, with the time left."""

from __future__ import annotations

import re

from agenvoy_cli.output import progress_line
from tests.helpers.search import add


def test_backfill_vectors_progress_in_messages(run, home, words, monkeypatch):
    for sid in ("a", "b", "c"):
        add(run, sid, *[f"{sid} message {i}" for i in range(30)])
    monkeypatch.setenv("AGENVOY_PROGRESS_SECONDS", "0")  # a line after every batch
    res = run("backfill", "--all", "--vectors", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["embedded"] == 90 == words.calls
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("agenvoy: backfill ")]
    assert lines, res.stderr
    pat = re.compile(r"agenvoy: backfill (\d+)/90 messages \(([\d.e+]+) messages/s, \d+ s"
                     r"(, about \d+ (s|min|h) left)?\)$")
    done = []
    for line in lines:
        m = pat.match(line)
        assert m, line
        assert float(m.group(2)) > 0  # never a rate rounded to zero
        done.append(int(m.group(1)))
        assert (m.group(3) is None) == (int(m.group(1)) == 90), line  # time left until done
    assert done == sorted(done) and done[-1] == 90 and len(done) >= 3  # across the sessions


def test_progress_line_rate_and_time_left():
    assert progress_line(3, 10, 172.0, "sessions") == \
        "3/10 sessions (0.0174 sessions/s, 3 min, about 7 min left)"
    assert progress_line(100, 400, 10.0, "messages") == \
        "100/400 messages (10 messages/s, 10 s, about 30 s left)"
    assert progress_line(400, 400, 40.0, "messages") == "400/400 messages (10 messages/s, 40 s)"
