"""Issue #18, RAG: ignore files as git reads them, text in any common encoding, Markdown
structure as CommonMark parses it, progress outside a terminal, the cost up front and
--no-vectors. Everything goes through the CLI."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.helpers.rag import ok

# A pattern corpus: each line is a gitignore pattern (<sp> is a space); the hand-written matcher got
# `[]a]`, `x[/]y`, the trailing backslash and `[[:digit:]]` wrong.
PATTERNS = r"""[]a]
x[/]y
trail\
[[:digit:]]*.num
[[:upper:]]*.up
*.log
!keep.log
build/
/top-only.txt
docs/**/draft.md
\#hash.txt
spaced.txt<sp><sp><sp>
esc\ space.txt\<sp>
a/**/b.txt
**/logs
*.py[co]
!important.pyc
foo?.txt
[!a-c]x.md
[a-c]y.md
dir-only/
**/deep/*.tmp
abc/**
\!bang.txt
*.[!o]bj
z\[1].txt
""".replace("<sp>", " ")  # trailing spaces: dropped by git unless escaped
FILES = ["]", "al", "x/y", "x[/]y", "trail", "trail\\", "1a.num", "a1.num", "Up.up", "up.up",
         "x.log", "keep.log", "build/o.txt", "src/build", "top-only.txt", "src/top-only.txt",
         "docs/a/b/draft.md", "docs/draft.md", "#hash.txt", "spaced.txt", "esc space.txt ",
         "esc space.txt", "a/q/r/b.txt", "a/b.txt", "ab.txt", "logs/l.txt", "z/logs/m.txt",
         "m.pyc", "d/m.pyo", "important.pyc", "foo1.txt", "foo12.txt", "dx.md", "ax.md",
         "ay.md", "dy.md", "dir-only/f", "sub/dir-only", "q/deep/w.tmp", "deep/w.tmp",
         "abc/d/e.txt", "!bang.txt", "bang.txt", "x.obj", "x.abj", "z[1].txt", "z1.txt",
         "plain.txt"]


def git_kept(repo: Path) -> set[str]:
    """The files git does not ignore, by `git check-ignore` (one call, on stdin)."""
    env = {**os.environ, "HOME": str(repo.parent), "XDG_CONFIG_HOME": str(repo.parent),
           "GIT_CONFIG_NOSYSTEM": "1"}
    res = subprocess.run(["git", "check-ignore", "--stdin", "-z", "--no-index"],
                         input="\0".join(FILES).encode() + b"\0", cwd=repo,
                         capture_output=True, env=env, timeout=30)
    assert res.returncode in (0, 1), res.stderr
    ignored = {p for p in res.stdout.decode().split("\0") if p}
    return set(FILES) - ignored


def test_gitignore_matches_git_check_ignore(run, tmp_path, words):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=30)
    (repo / ".gitignore").write_text(PATTERNS)
    for rel in FILES:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(f"file {rel}\n")
    expected = git_kept(repo)
    assert "plain.txt" in expected and "x.log" not in expected  # the oracle works
    res = run("rag", "create", "g", "--path", str(repo), "--json")
    assert res.exit_code == 0, res.stderr
    assert "FutureWarning" not in res.stderr
    files = ok(run("rag", "files", "g", "--json"))["files"]
    indexed = {os.path.relpath(f["path"], repo) for f in files}
    assert indexed == expected


SAMPLES = {
    # file name: (encoding, text, a query that must find it)
    "big5.txt": ("big5", "資料庫連線逾時的處理方式。當伺服器沒有回應時，請重新設定連線參數，"
                         "並檢查防火牆設定與網路狀態。", "防火牆"),
    "sjis.txt": ("shift_jis", "東京都の天気予報によると、明日は雨が降るでしょう。傘を忘れずに"
                              "持って行ってください。週末は晴れる見込みです。", "天気予報"),
    "euckr.txt": ("euc-kr", "데이터베이스 연결 시간이 초과되었습니다. 서버가 응답하지 않으면 "
                            "연결 설정을 다시 확인하고 방화벽 상태를 점검하십시오.", "방화벽"),
    "latin1.txt": ("latin-1", "Le café crème et la crème brûlée sont délicieux. Où est la "
                              "bibliothèque? À côté de l'église, près du théâtre.", "brûlée"),
    "utf16.txt": ("utf-16", "UTF-16 with a byte order mark: 寬頻網路 and naïve café.",
                  "寬頻網路"),
    "gb.txt": ("gb18030", "简体中文的文件也要能找到：数据库连接超时，请检查防火墙设置和网络"
                          "状态。", "数据库"),
}


def test_files_in_legacy_encodings_are_decoded(run, tmp_path, words):
    folder = tmp_path / "enc"
    folder.mkdir()
    for name, (encoding, text, _) in SAMPLES.items():
        (folder / name).write_bytes(text.encode(encoding))
    sync = ok(run("rag", "create", "enc", "--path", str(folder), "--json"))["sync"]
    assert sync["skipped_files"] == [] and sync["indexed"] == len(SAMPLES)
    for name, (_, text, query) in SAMPLES.items():
        doc = ok(run("rag", "search", "enc", query, "--mode", "keyword", "--json"))
        hits = [h for h in doc["results"] if Path(h["path"]).name == name]
        assert hits, (name, doc)
        assert text.split("。")[0].split(".")[0][:8] in hits[0]["text"], (name, hits[0])


MARKDOWN = """# Guide

Intro paragraph.

```
fenced start
    ```
still inside the fence: kiwifruit
```

Multi line
setext title
============

Body under the setext heading: pomegranate

<!--
# not a heading in a comment
-->

After the comment: rambutan

- a list item
  # a hash line in a list
- another item: durian

## Real second

Closing words: lychee
"""


def test_markdown_structure_follows_commonmark(run, tmp_path, words):
    folder = tmp_path / "md"
    folder.mkdir()
    (folder / "guide.md").write_text(MARKDOWN)
    ok(run("rag", "create", "md", "--path", str(folder), "--json"))

    def heading(word: str) -> str | None:
        doc = ok(run("rag", "search", "md", word, "--mode", "keyword", "--json"))
        assert doc["results"], word
        return doc["results"][0]["heading"]

    # the 4-space-indented ``` does not close the fence: kiwifruit is code under Guide
    assert heading("kiwifruit") == "Guide"
    assert heading("pomegranate") == "Multi line setext title"
    assert heading("rambutan") == "Multi line setext title"
    assert heading("durian") == "Multi line setext title"
    assert heading("lychee") == "Multi line setext title > Real second"


def make_tree(root: Path, n: int) -> None:
    root.mkdir()
    for i in range(n):
        (root / f"note{i:03}.md").write_text(f"# Note {i}\n\nword{i} " + "filler text " * 40)


def test_progress_lines_outside_a_terminal(tmp_path, embed_server):
    from tests.conftest import agenvoy

    make_tree(tmp_path / "t", 40)
    env = {**embed_server, "AGENVOY_PROGRESS_SECONDS": "0"}
    res = agenvoy("rag", "create", "t", "--path", str(tmp_path / "t"), "--json", env=env)
    assert res.returncode == 0, res.stderr
    err = res.stderr.decode()
    lines = [ln for ln in err.splitlines() if "files/s" in ln]
    assert lines, err
    assert "/40 files" in lines[-1] and "40/40" in err
    # the cost is announced before the work
    first = err.splitlines()[0]
    assert "40 files" in first and "--no-vectors" in first, err


def test_no_vectors_indexes_keywords_only_and_vectors_later(run, home, tmp_path,
                                                            words):
    make_tree(tmp_path / "t", 5)
    doc = ok(run("rag", "create", "t", "--path", str(tmp_path / "t"), "--no-vectors", "--json"))
    assert doc["sync"]["indexed"] == 5
    assert not (home / ".store" / "chroma").exists()  # nothing embedded
    assert ok(run("rag", "search", "t", "word3", "--mode", "keyword", "--json"))["results"]
    hybrid = run("rag", "search", "t", "word3", "--json")
    assert hybrid.exit_code == 0 and "--vectors" in hybrid.stderr
    assert hybrid.json()["results"]  # keyword results still
    assert not (home / ".store" / "chroma").exists()
    listed = ok(run("rag", "list", "--json"))["databases"][0]
    # a boolean is an adjective or has_/is_ (docs/json-vocabulary.md rule 8): a plural noun
    # such as "vectors" is always a list (rule 2)
    assert listed["has_vectors"] is False and "vectors" not in listed
    # vectors later
    later = ok(run("rag", "sync", "t", "--vectors", "--json"))
    assert later["indexed"] == 5
    assert (home / ".store" / "chroma").is_dir()
    assert ok(run("rag", "list", "--json"))["databases"][0]["has_vectors"] is True
    assert ok(run("rag", "files", "t", "--json"))["summary"]["has_vectors"] is True
    sem = ok(run("rag", "search", "t", "word3", "--mode", "semantic", "--json"))
    assert sem["results"]
