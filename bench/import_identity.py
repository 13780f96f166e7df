"""bench/import_identity: import the same inputs with two checkouts (A/B) into fresh homes
and compare the homes: every file byte for byte (history.json included), history.db by the
rows of every table (messages, both FTS indexes' shadow tables, ...) but the columns that hold
the run's own clock or the file's inode/mtime. For a speed change that must keep an import's
result exactly as it was.

Usage: python bench/import_identity.py OLD_CHECKOUT NEW_CHECKOUT [FORMAT=PATH ...]
       (tests/data/transfer's fixtures always; add e.g. claude-code=/tmp/cc50.jsonl, made by
       `python bench/import_memory.py --format claude-code --generate 50 --output ...`)
Exit 0 when every case is identical.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "tests/data/transfer"
CASES = [("claude-code", FIXTURES / "claude"), ("claude-code", FIXTURES / "claude-turn"),
         ("codex", FIXTURES / "codex"), ("chatgpt", FIXTURES / "chatgpt/conversations.json"),
         ("openai", FIXTURES / "openai.jsonl"),
         ("auto", FIXTURES / "old-partial/after-3-records.json")]
# the run's own clock, the file's inode and mtime as the run saw them
VOLATILE = {"agenvoy_migrations": ("applied_at",), "import_sources": ("updated_at",),
            "session_stats": ("hist_ino", "hist_mtime_ns", "sum_mtime_ns", "dir_mtime_ns")}


def run(code: str, home: str, fmt: str, path: Path) -> tuple[int, str]:
    env = dict(os.environ, AGENVOY_HOME=home, PYTHONPATH=code)
    done = subprocess.run([sys.executable, "-m", "agenvoy_cli", "import", fmt, str(path),
                           "--now", "--json"], cwd=code, env=env, capture_output=True,
                          text=True, check=False)
    return done.returncode, done.stdout


def state(home: str) -> dict[str, str]:
    out = {}
    for path in sorted(Path(home).rglob("*")):
        if not path.is_file() or path.name.endswith(("-wal", "-shm", ".lock")):
            continue
        rel = str(path.relative_to(home))
        if not path.name.endswith(".db"):
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            continue
        conn = sqlite3.connect(path)
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            cur = conn.execute(f'SELECT * FROM "{table}"')
            cols = [d[0] for d in cur.description]
            skip = VOLATILE.get(table, ())
            rows = sorted((tuple(v for k, v in zip(cols, r) if k not in skip)
                           for r in cur.fetchall()), key=repr)
            digest = hashlib.sha256(repr(rows).encode()).hexdigest()
            out[f"{rel}:{table}"] = f"{digest} ({len(rows)} rows)"
        conn.close()
    return out


def main() -> int:
    old, new = sys.argv[1], sys.argv[2]
    extra = [(arg.split("=", 1)[0], Path(arg.split("=", 1)[1])) for arg in sys.argv[3:]]
    differing = 0
    for fmt, path in extra + CASES:
        homes = (tempfile.mkdtemp(prefix="import-identity-"),
                 tempfile.mkdtemp(prefix="import-identity-"))
        try:
            docs = [run(code, home, fmt, path) for code, home in zip((old, new), homes)]
            a, b = state(homes[0]), state(homes[1])
        finally:
            for home in homes:
                shutil.rmtree(home, ignore_errors=True)
        diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        same = not diff and docs[0] == docs[1]
        print(f"{fmt:12} {path.name[:40]:40} {len(a):3} files/tables  "
              f"{'IDENTICAL' if same else 'DIFFERENT'} (exit {docs[0][0]})")
        for key in diff:
            print("   differs:", key, a.get(key), b.get(key))
        differing += not same
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
