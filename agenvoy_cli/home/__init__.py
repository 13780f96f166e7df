"""The home: the on-disk layout, config, atomic files, the lock, SQLite and FTS text."""

from agenvoy_cli.exports import lazy

# What the layers above use, and the room that holds it (None: the room itself).
_EXPORTS: dict[str, str | None] = {
    "fts": None,
    "salvage": None,
    "sqlite": None,
    "Settings": "config",
    "load_settings": "config",
    "number_setting": "config",
    "FILE_MODE": "files",
    "FileIdentity": "files",
    "atomic_write_bytes": "files",
    "atomic_write_json": "files",
    "ensure_dir": "files",
    "file_identity": "files",
    "fsync_dir": "files",
    "move_aside": "files",
    "open_regular": "files",
    "parse_json": "files",
    "read_bytes": "files",
    "read_json": "files",
    "stale_temp_files": "files",
    "Layout": "layout",
    "NAME_MAX_BYTES": "layout",
    "resolve_home": "layout",
    "validate_name": "layout",
    "Locks": "locking",
    "change_stamp": "sqlite",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy(__name__, _EXPORTS)
