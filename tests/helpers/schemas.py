"""Check a --json document against its JSON Schema in docs/schema/ and the vocabulary
(docs/json-vocabulary.md): `*_at` an RFC 3339 time, `*_at_ns` and `*_count` integers,
a plural noun a list, `count` the length of the main list, schema_version first."""

from __future__ import annotations

import json
import re

from tests.conftest import ROOT

SCHEMAS = ROOT / "docs" / "schema"
RFC3339 = re.compile(r"\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)\Z")


NUMBER_WORDS = {"bytes", "seconds", "lines", "status", "count"}


def validate(doc: dict, name: str) -> None:
    from jsonschema import Draft202012Validator

    schema = json.loads((SCHEMAS / f"{name}.json").read_text())
    Draft202012Validator.check_schema(schema)
    errors = sorted(Draft202012Validator(schema).iter_errors(doc), key=str)
    assert not errors, f"{name}: " + "; ".join(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5])
    assert next(iter(doc)) == "schema_version"
    vocabulary(doc, name)


def vocabulary(node, where: str) -> None:
    """The rules that hold for every field, whoever added it."""
    if isinstance(node, list):
        for item in node:
            vocabulary(item, where)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        at = f"{where}.{key}"
        if key.endswith("_at") and value is not None:
            assert isinstance(value, str) and RFC3339.match(value), (at, value)
        if key.endswith(("_ns", "_count")) or key == "count":
            assert value is None or (isinstance(value, int) and not isinstance(value, bool)), \
                (at, value)
        if type(value) is int and key.endswith("s") and key not in NUMBER_WORDS \
                and not key.endswith(("_ns", "_bytes", "_seconds")):
            raise AssertionError(f"{at}: a plural noun is a list, not a number ({value})")
        if key == "count" and isinstance(node.get(_main_list(node)), list):
            assert value == len(node[_main_list(node)]), at
        vocabulary(value, at)


def _main_list(node: dict) -> str:
    lists = [k for k, v in node.items() if isinstance(v, list) and k not in
             ("notes", "paths", "keywords", "databases", "deleted_files", "requests")]
    return lists[0] if len(lists) == 1 else ""
