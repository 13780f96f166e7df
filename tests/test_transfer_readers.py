"""The importers' readers return what they read (records, and what they learnt beside them:
transfer/records.py Learnt) and write nothing: the engine folds what they learnt into a
unit's meta and report, the one writer of both while a unit is read (#50)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.transfer import CODEX, DATA, SIDECHAINS, TURN


def _export(tmp_path: Path) -> Path:
    """A small `export` file (transfer/agenvoy.py's format) of one session."""
    path = tmp_path / "export.jsonl"
    lines = [{"type": "session", "format": "agenvoy-export", "version": 1, "session_id": "s",
              "home": "/elsewhere", "start_seq": 0, "message_count": 1,
              "history_format": "header", "requests": [{"model": "m"}]},
             {"type": "message", "seq": 0, "message": {"role": "user", "content": "hi"}},
             {"type": "summary", "summary": None, "meta": None}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _units(tmp_path: Path) -> Iterator[tuple[str, object]]:
    """(what, unit) for every reader, in the forms it reads."""
    from agenvoy_cli.transfer import agenvoy, chatgpt, claude_code, codex, openai

    for now in (True, False):
        for file in (SIDECHAINS, TURN):
            for unit in claude_code.file_units(file, None, "apart", now=now):
                yield f"claude-code {file.name} now={now} {unit.key}", unit
        yield f"codex now={now}", codex.file_unit(CODEX, None, now=now)
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"model": "gpt-x", "body": {"tools": [], "messages": [
        {"role": "user", "content": "a"}]}, "messages": [{"role": "user", "content": "b"}],
        "temperature": 0}, indent=1))
    batch = tmp_path / "batch.jsonl"
    batch.write_text("".join(json.dumps({"custom_id": f"r{i}", "body": {
        "model": "m", "messages": [{"role": "user", "content": f"q{i}"}]}}) + "\n"
        for i in range(3)))
    for path, session in ((DATA / "openai.jsonl", None), (request, None), (batch, "all"),
                          (batch, None)):
        for unit in openai.file_units(path, session):
            yield f"openai {path.name} session={session}", unit
    for unit in chatgpt.units(DATA / "chatgpt" / "conversations.json", None):
        yield f"chatgpt {unit.key}", unit
    for unit in agenvoy.units(_export(tmp_path), None):
        yield f"agenvoy {unit.key}", unit


def test_a_reader_writes_nothing_it_was_handed(tmp_path: Path) -> None:
    """Every reader read to its end (and from a cursor, where it can start past records)
    leaves its unit's meta and report as they were: what it learnt is returned."""
    units, items = 0, 0
    for what, unit in _units(tmp_path):
        before = copy.deepcopy((unit.meta, unit.report))
        for skip in (0, 1) if unit.skips else (0,):
            items += len(list(unit.records(skip=skip) if skip else unit.records()))
            assert (unit.meta, unit.report) == before, f"{what} (skip={skip}) wrote its unit"
        units += 1
    assert units >= 12 and items >= 50


def test_the_engine_folds_what_a_reader_learnt(tmp_path: Path) -> None:
    """What the readers return reaches the unit through engine.records: claude-code's open
    and sidechain counts, its records' cwd and the side pass owed, codex's session meta,
    the requests gathered into one session, a request's members."""
    from agenvoy_cli.transfer import claude_code, codex, engine, openai
    from agenvoy_cli.transfer.records import OWED, Learnt, Record

    main, *_ = claude_code.file_units(SIDECHAINS, None, "apart", now=False)
    items = list(main.records())
    assert all(isinstance(i, (Record, Learnt)) for i in items)
    assert any(isinstance(i, Learnt) for i in items) and main.report == {}
    records = [r for r in engine.records(main)]
    assert records == [i for i in items if isinstance(i, Record)]
    assert main.report["sidechain"] is True and main.report["open"] == 0
    assert main.meta["cwd"] == "/home/ada/src/shop" and main.meta[OWED].endswith("#sidechain")

    rollout = codex.file_unit(CODEX, None, now=True)
    list(engine.records(rollout))
    assert rollout.report == {"open": 0} and isinstance(rollout.meta.get("cwd"), str)

    batch = tmp_path / "batch.jsonl"
    batch.write_text("".join(json.dumps({"custom_id": "r", "body": {
        "model": f"m{i % 2}", "messages": [{"role": "user", "content": f"q{i}"}]}}) + "\n"
        for i in range(4)))
    (gathered,) = openai.file_units(batch, "all")
    list(engine.records(gathered))
    assert gathered.meta["requests"] == [{"custom_id": "r", "body": {"model": "m0"}},
                                         {"custom_id": "r", "body": {"model": "m1"}}]
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"model": "gpt-x", "messages": [
        {"role": "user", "content": "b"}], "temperature": 0}, indent=1))
    (one,) = openai.file_units(request, None)
    list(engine.records(one))
    assert one.meta["request"] == {"model": "gpt-x", "temperature": 0}


def test_fold_is_in_the_order_read() -> None:
    """A key dropped then set is set; a list value joins once; the report is updated."""
    from agenvoy_cli.transfer import engine
    from agenvoy_cli.transfer.records import Learnt, Unit

    unit = Unit("k", "f", "s", list, {"a": 1, "b": 2, "requests": [{"x": 1}]})
    engine.fold(unit, Learnt(dropped=("a", "b"), meta={"a": 3},
                             lists={"requests": ({"x": 1}, {"y": 2}, {"y": 2}), "new": ()},
                             report={"open": 2}))
    assert unit.meta == {"a": 3, "requests": [{"x": 1}, {"y": 2}], "new": []}
    assert unit.report == {"open": 2}
