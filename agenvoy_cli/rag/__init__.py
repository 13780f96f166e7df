"""Document RAG: named databases of files, walked (walk), read (reading), parsed (formats,
markdown), chunked (chunking), indexed (source_sync, commit) and searched (search); the records
themselves (create, list) are in records, remove (files, vectors, then the record) in commit."""

from agenvoy_cli.rag.commit import remove
from agenvoy_cli.rag.records import (
    DEFAULT_LIMIT,
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MODE,
    MODES,
    create,
    human_size,
    iter_chunks,
    list_databases,
    list_files,
    parse_size,
)
from agenvoy_cli.rag.search import SearchResult, search
from agenvoy_cli.rag.source_sync import EMBED_BATCH, SyncReport, sync

__all__ = [
    "DEFAULT_LIMIT", "DEFAULT_MAX_FILE_BYTES", "DEFAULT_MODE", "EMBED_BATCH", "MODES",
    "SearchResult", "SyncReport", "create", "human_size", "iter_chunks", "list_databases",
    "list_files", "parse_size", "remove", "search", "sync",
]
