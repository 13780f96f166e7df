"""The JSON vocabulary every command speaks (docs/json-vocabulary.md; schemas in
docs/schema/). Written once here so that every command, and every field added later, uses
the same names: `schema_version` first, a plural noun is a list (with `count` for a
command's main list), a number of things is `<singular>_count`, a time is `<name>_at`
(RFC 3339 with offset) plus `<name>_at_ns` (UTC unix nanoseconds) where precision matters,
errors are `{"error": {"code", "kind", "message"}}`."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

SCHEMA_VERSION = 1
NS = 1_000_000_000

# Exit code -> error kind (exit codes: errors.py). A usage error is exit 2 as bad input.
KINDS = ("usage", "bad_input", "not_found", "corrupt", "busy", "failed", "interrupted",
         "internal")


def document(doc: dict[str, Any]) -> dict[str, Any]:
    """doc with schema_version as its first key."""
    return {"schema_version": SCHEMA_VERSION, **{k: v for k, v in doc.items()
                                                 if k != "schema_version"}}


def error_document(code: int, kind: str, message: str) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION,
            "error": {"code": code, "kind": kind, "message": message}}


def list_document(key: str, items: list[Any], **extra: Any) -> dict[str, Any]:
    """A command's main list under its plural key, with its count."""
    return {key: items, "count": len(items), **extra}


def rfc3339(ns: int | None) -> str | None:
    """Local time with its offset, seconds precision (2025-01-02T15:04:05+08:00)."""
    if ns is None:
        return None
    return datetime.fromtimestamp(ns // NS).astimezone().isoformat(timespec="seconds")


def moment(name: str, ns: int | None) -> dict[str, Any]:
    """{"<name>_at": RFC 3339, "<name>_at_ns": ns} (both null when unknown)."""
    return {f"{name}_at": rfc3339(ns), f"{name}_at_ns": ns}


def local_ns(text: str | None) -> int | None:
    """Upstream's local time text ('YYYY-MM-DD HH:MM:SS', the local zone) as UTC unix ns
    (None when missing or not in that form)."""
    if not text:
        return None
    try:
        moment = datetime.strptime(text.strip(), "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    return int(time.mktime(moment.timetuple())) * NS


def now_ns() -> int:
    return time.time_ns()
