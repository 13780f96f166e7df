"""Issue #18: one HTTP helper for the LLM and the embedders — the summarizer retries 429
and 502/503/504 like the embedders do, honouring Retry-After, and gives up after the
retries with the last status."""

from __future__ import annotations

import time

from tests.helpers.summaries import build, one, session, summary


def test_summarizer_retries_a_rate_limit_after_retry_after(run, home, llm):
    build(run, "s", 4)
    llm.plan[1] = "429"
    llm.retry_after = "1"
    began = time.monotonic()
    res = run("summarize", "s", "--json")
    assert res.exit_code == 0, res.stderr
    assert time.monotonic() - began >= 1.0  # waited as told
    assert len(llm.calls) == 2 and llm.calls[0].body == llm.calls[1].body
    assert summary(home)["key_decisions"] == ["call 2"]


def test_summarizer_gives_up_after_the_retries(run, home, llm):
    build(run, "s", 4)
    for n in (1, 2, 3):
        llm.plan[n] = "503"
    res = run("summarize", "s", "--json")
    assert res.exit_code == 1
    assert len(llm.calls) == 3  # one call and two retries
    assert "HTTP 503" in one(res)["error"]
    assert not (session(home, "s") / "summary.json").exists()


def test_a_500_is_retried_like_502_503_504(run, home, llm):
    build(run, "s", 4)
    llm.plan[1] = "500"  # OpenAI documents 500 as retryable: one retry succeeds
    res = run("summarize", "s", "--json")
    assert res.exit_code == 0, res.stderr
    assert len(llm.calls) == 2 and summary(home)["key_decisions"] == ["call 2"]


PASSWORD = "pa55-w0rd-xyz"


def test_user_and_password_in_the_base_url_are_basic_auth_and_masked(
        run, home, llm, monkeypatch):
    import base64

    monkeypatch.delenv("AGENVOY_LLM_API_KEY")
    url = llm.url.replace("http://", f"http://bob:{PASSWORD}@")
    monkeypatch.setenv("AGENVOY_LLM_BASE_URL", url)
    build(run, "s", 4)
    res = run("summarize", "s", "--dry-run")  # the plan names the endpoint, not the password
    assert res.exit_code == 0, res.stderr
    assert PASSWORD not in res.stdout + res.stderr and "Authorization: Basic ****" in res.stdout
    res = run("summarize", "s", "--json")
    assert res.exit_code == 0, res.stderr
    expected = "Basic " + base64.b64encode(f"bob:{PASSWORD}".encode()).decode()
    assert llm.calls[0].headers["Authorization"] == expected
    assert "@" not in llm.calls[0].headers["Host"]
    build(run, "s", 2, first=4)
    for n in (2, 3, 4):
        llm.plan[n] = "500"  # its body echoes the Authorization header
    res = run("summarize", "s", "--json")
    assert res.exit_code == 1
    out = res.stdout + res.stderr
    assert PASSWORD not in out and expected.split()[1] not in out, out
    assert "HTTP 500" in one(res)["error"] and "bob:****@" in one(res)["error"]
