"""#49: an in-process interruption (a hook's time limit, Ctrl-C) never leaves archived messages
out of history.json, never marks them `gone`; doctor finds such a hole (left by an earlier
version) and --repair puts it back; the hook stopped while it waits for the store's lock
leaves a state the next hook completes. (The interruption at every injection point of every
write path is tests/test_fault_sweep.py's `interrupt` and `timelimit` failures.)"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import orjson

from tests.conftest import agenvoy
from tests.helpers import fault_sweep
from tests.helpers.transfer import TURN

FULL = os.environ.get("AGENVOY_FAULT_SWEEP") == "full"


def archive(home: Path) -> list[tuple]:
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        return conn.execute("SELECT session_id, seq, role, content, message, gone FROM messages "
                            "ORDER BY session_id, seq").fetchall()


def history(home: Path, sid: str) -> list[dict]:
    return orjson.loads((home / "sessions" / sid / "history.json").read_bytes())


def write_history(home: Path, sid: str, messages: list[dict]) -> None:
    (home / "sessions" / sid / "history.json").write_bytes(orjson.dumps(messages))


def set_gone(home: Path, sid: str, seqs: list[int]) -> None:
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        conn.executemany("UPDATE messages SET gone = 1 WHERE session_id = ? AND seq = ?",
                         [(sid, s) for s in seqs])
    conn.close()


def doctor(home: Path, *args: str) -> dict:
    res = agenvoy("doctor", "--json", *args, env={"AGENVOY_HOME": str(home)})
    return {"code": res.returncode, **orjson.loads(res.stdout)}


def hook(home: Path, transcript: Path, *args: str, env: dict | None = None) -> None:
    data = orjson.dumps({"hook_event_name": "Stop", "session_id": TURN.stem,
                         "transcript_path": str(transcript), "cwd": "/home/ada/src/shop"})
    res = agenvoy("hook", "claude-code", *args, input=data, timeout=120,
                  env={"AGENVOY_HOME": str(home), **(env or {})})
    assert res.returncode == 0, res.stderr


def test_doctor_puts_back_an_append_left_out_of_history_json(home):
    """The state an append stopped right after its archive commit left (before #49: the
    old history.json put back, the batch archived, not yet marked gone)."""
    fault_sweep.conversation(home, n=6)
    full = history(home, "s")
    write_history(home, "s", full[:4])
    found = doctor(home)
    holes = [p for p in found["problems"] if p["check"] == "history.json"]
    assert found["code"] == 1 and len(holes) == 1 and "2 archived message(s)" in \
        holes[0]["detail"], found
    assert doctor(home, "--repair")["code"] == 0
    assert history(home, "s") == full
    assert doctor(home)["code"] == 0
    assert all(r[5] == 0 for r in archive(home))


def test_doctor_restores_a_hole_an_older_hook_left_mid_conversation(home, tmp_path):
    """An imported session whose history.json lacks archived messages mid-conversation,
    marked gone by the sync that followed (what a time-limited hook did before #49): only
    this tool writes an imported session's history.json, so they are a hole."""
    transcript = tmp_path / "projects" / TURN.parent.name / TURN.name
    transcript.parent.mkdir(parents=True)
    shutil.copy(TURN, transcript)
    hook(home, transcript)
    one_shot = archive(home)
    sid = one_shot[0][0]
    full = history(home, sid)
    write_history(home, sid, full[:2] + full[4:])
    set_gone(home, sid, [2, 3])
    found = doctor(home)
    assert found["code"] == 1 and any("place 2-3" in p["detail"] for p in found["problems"]), \
        found
    assert doctor(home, "--repair")["code"] == 0
    assert history(home, sid) == full and archive(home) == one_shot
    assert doctor(home)["code"] == 0
    hook(home, transcript)  # the next turn's hook: nothing to add, nothing taken out
    assert history(home, sid) == full and archive(home) == one_shot


def test_a_message_another_program_removed_mid_file_stays_gone(home):
    """The identity rule is kept for sessions this tool does not own alone: a message that
    left history.json mid-file (Agenvoy's rewrite drops tool messages; a person's edit) is
    not a hole."""
    fault_sweep.conversation(home, n=6)
    full = history(home, "s")
    write_history(home, "s", full[:2] + full[3:])
    assert agenvoy("backfill", "s", env={"AGENVOY_HOME": str(home)}).returncode == 0
    assert [r[1] for r in archive(home) if r[5]] == [2]
    assert doctor(home)["code"] == 0
    assert history(home, "s") == full[:2] + full[3:]


def test_the_hook_stopped_by_its_time_limit_behind_the_lock(home, tmp_path):
    """The lock wait as a path of its own: another process holds the store's lock, the
    hook's time limit fires while it waits; nothing is half-done, the next hook completes
    the import exactly as a one-shot import, nothing is marked gone."""
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.home.locking import Locks

    base = tmp_path / "base"
    fault_sweep._transcript_begun(base, tmp_path / "inputs")
    transcript = fault_sweep._growing(tmp_path / "inputs")
    reference = fault_sweep.copy_home(base, tmp_path / "reference")
    hook(reference, transcript)
    want = fault_sweep.core(fault_sweep.state(reference))
    case = fault_sweep.copy_home(base, tmp_path / "case")
    before = fault_sweep.core(fault_sweep.state(case))
    with Locks().hold(Layout(case).lock, 5):
        hook(case, transcript, "--time-limit", "1", env={"AGENVOY_LOCK_TIMEOUT": "60"})
    assert "time limit" in (case / ".store" / "hook.log").read_text()
    assert fault_sweep.core(fault_sweep.state(case)) == before
    hook(case, transcript)
    assert fault_sweep.core(fault_sweep.state(case)) == want and not want["gone"]
    assert doctor(case)["code"] == 0


def test_session_reset_and_remove_are_all_or_nothing(tmp_path):
    """#49: on a full disk (or a failing one, kill -9, Ctrl-C) at the commit that deletes
    the session's rows, `session reset` and `session remove` left history.json deleted and
    the rows in place, and doctor --repair then put history.json back: now the home is as
    before (vectors may lag: derived), or, stopped after that commit, done."""
    paths = {p.name: p for p in fault_sweep.paths("http://127.0.0.1:9")}
    problems = []
    # Both paths start from the same home (with_vectors): it is made once. A failing disk
    # and a full one take the same way out (an OSError, exit 1: only the message differs),
    # so each command gets one of them; the full sweep (AGENVOY_FAULT_SWEEP=full) runs both.
    cases = {"session reset --no-summary": ("enospc", "interrupt", "kill"),
             "session remove": ("eio", "interrupt", "kill")}
    base = None
    for name, failures in cases.items():
        path = paths[name]
        if base is not None:
            fault_sweep.copy_home(base, tmp_path / f"base-{fault_sweep.slug(path)}")
        ref = fault_sweep.reference(path, tmp_path)
        base = ref.base
        at = ref.points.index("commit COMMIT") + 1  # the rows' deletion
        for failure in ("enospc", "eio", "interrupt", "kill") if FULL else failures:
            problems += fault_sweep.check_case(ref, at, failure, tmp_path)
    assert not problems, "\n".join(problems)


def test_hooks_stopped_by_a_real_time_limit_on_a_growing_transcript(home, tmp_path):
    """The issue's run, bounded: a Stop hook after each record of a turn, each with a time
    limit short enough that its SIGALRM lands wherever it lands (before anything, mid-import,
    or not at all); then one hook with time to spare. The home ends as one import of the
    whole turn: history.json and the archive alike, nothing gone, doctor clean."""
    lines = TURN.read_bytes().splitlines(keepends=True)
    transcript = tmp_path / "projects" / TURN.parent.name / TURN.name
    transcript.parent.mkdir(parents=True)
    reference = tmp_path / "reference"
    transcript.write_bytes(b"".join(lines))
    hook(reference, transcript)
    for done, limit in zip(range(2, len(lines) + 1), (0.1, 0.3, 0.6, 0.15, 0.45, 0.9, 0.2,
                                                      0.5, 1.2)):
        transcript.write_bytes(b"".join(lines[:done]))
        hook(home, transcript, "--time-limit", str(limit))
    hook(home, transcript)
    want = fault_sweep.core(fault_sweep.state(reference))
    assert fault_sweep.core(fault_sweep.state(home)) == want and not want["gone"]
    assert doctor(home)["code"] == 0
