"""CI runs exactly what the README tells a newcomer to run."""

from __future__ import annotations

import re

from tests.conftest import ROOT


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    block = re.search(r"# 2\. install and run the tests[^\n]*\n([^\n]+)\n", readme)
    assert block, "the README's quick start lost its test command"
    script = (ROOT / ".ci" / "run").read_text("utf-8").strip().splitlines()
    assert script[-1] == block.group(1).strip()
    assert "pytest" in script[-1] and ".[test]" in script[-1]
