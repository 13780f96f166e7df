"""The home: the on-disk layout, config, atomic files, the lock, SQLite and FTS text."""
