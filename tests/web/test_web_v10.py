"""The viewer on a home Agenvoy 1.0 shares (#47, #48): the persona of its `session` table is
shown on the sessions page and on the session's page (name, self_id, model).

Real parts: the real `agenvoy web` process on 127.0.0.1, a home laid out as Agenvoy 1.0
writes it (tests/agenvoy_sim_v10.py), real HTTP; every wait is bounded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agenvoy_sim_v10 import GoAgentV10
from tests.conftest import agenvoy
from tests.web.seed import request, viewer

pytestmark = pytest.mark.slow


def test_the_1_0_persona_is_shown(home: Path) -> None:
    msgs = [{"role": "user", "content": "plan the release"},
            {"role": "assistant", "content": "the release goes out on Thursday"}]
    GoAgentV10(home).set_persona("s", name="Aria", self_id="aria-bot", model="gpt-5-mini")
    assert agenvoy("append", "s", "--messages", "-", input=json.dumps(msgs)).returncode == 0
    with viewer(home) as web:
        for path in ("/", "/s/s"):
            status, _, body = request(web.url, path, headers=web.auth())
            assert status == 200, (path, body[:300])
            assert b"Aria (aria-bot, gpt-5-mini)" in body, (path, body[:2000])
