"""Whether a history.db ever existed in this home: its creation leaves a line in the store's
lock file (never deleted), so a later missing or 0-byte history.db is known to be a loss,
not a home that never had one (an upstream home before its first backfill)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from agenvoy_cli.home.faults import hit
from agenvoy_cli.home.files import open_regular


def is_empty(path: Path) -> bool:
    """Missing or 0 bytes: SQLite would silently start a new, empty archive there."""
    try:
        return path.stat().st_size == 0
    except FileNotFoundError:
        return True


def note_created(marker: Path, path: Path) -> None:
    """Leave a line in `marker` (the store's lock file, never deleted) saying the archive
    exists: a later missing or 0-byte history.db is then a loss doctor reports, not a home
    that never had one (an upstream home before its first backfill)."""
    fd = open_regular(marker, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        hit("write", marker)
        os.write(fd, f"{path.name} created {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
    finally:
        os.close(fd)


def archive_was_created(marker: Path) -> bool:
    try:
        return marker.stat().st_size > 0
    except FileNotFoundError:
        return False
