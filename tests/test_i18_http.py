"""Issue #18: one HTTP helper for the LLM and the embedders — the summarizer retries 429
and 502/503/504 like the embedders do, honouring Retry-After, and gives up after the
retries with the last status."""

from __future__ import annotations

import time

from tests.test_summarize import build, llm, one, session, summary  # noqa: F401 - fixture


def test_summarizer_retries_a_rate_limit_after_retry_after(run, home, llm):  # noqa: F811
    build(run, "s", 4)
    llm.plan[1] = "429"
    llm.retry_after = "1"
    began = time.monotonic()
    res = run("summarize", "s", "--json")
    assert res.exit_code == 0, res.stderr
    assert time.monotonic() - began >= 1.0  # waited as told
    assert len(llm.calls) == 2 and llm.calls[0].body == llm.calls[1].body
    assert summary(home)["key_decisions"] == ["call 2"]


def test_summarizer_gives_up_after_the_retries(run, home, llm):  # noqa: F811
    build(run, "s", 4)
    for n in (1, 2, 3):
        llm.plan[n] = "503"
    res = run("summarize", "s", "--json")
    assert res.exit_code == 1
    assert len(llm.calls) == 3  # one call and two retries
    assert "HTTP 503" in one(res)["error"]
    assert not (session(home, "s") / "summary.json").exists()
