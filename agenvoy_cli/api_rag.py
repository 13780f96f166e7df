"""The document-RAG methods of `Memory` (agenvoy_cli.api): databases of files, their sync
and search. Same contract as the rest of the API: each returns the document the matching
`agenvoy rag` command prints with --json."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from agenvoy_cli.contract import listing

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store

Progress = Callable[[int, int], None]


class RagMethods:
    """Mixed into Memory, which provides `store`."""

    store: Store

    def rag_databases(self) -> dict[str, Any]:
        """Every RAG database with its file and chunk counts, size and last sync."""
        from agenvoy_cli import rag

        return listing("databases", rag.list_databases(self.store))

    def rag_search(self, query: str, databases: Sequence[str] | None = None, *,
                   mode: str = "hybrid", limit: int = 8,
                   match: str | None = None) -> dict[str, Any]:
        """Search the named RAG databases (None: all of them): hybrid, keyword, semantic;
        match ("all" | "any", keyword): every term or any term (default: by query length)."""
        from agenvoy_cli import rag

        return rag.search(self.store, None if databases is None else list(databases),
                          query, mode, limit=limit, match=match).as_dict()

    def rag_create(self, name: str, paths: Sequence[str] = (), *, index: bool = True,
                   max_file_bytes: int | None = None, hidden: bool | None = None,
                   vectors: bool | None = None, progress: Progress | None = None,
                   announce: Callable[[int, int, bool], None] | None = None
                   ) -> dict[str, Any]:
        """Create the database `name` bound to `paths`, and index them now (`index`).
        vectors=False: keyword search only (fast); embed later with rag_sync(vectors=True)."""
        from agenvoy_cli import rag

        db = rag.create(self.store, name, list(paths), max_file_bytes=max_file_bytes,
                        hidden=hidden, vectors=vectors)
        doc: dict[str, Any] = {"database": db.name, "action": "created",
                               "paths": [s.path for s in db.sources]}
        if paths and index:
            doc["sync"] = self.rag_sync(name, progress=progress, announce=announce)
        return doc

    def rag_sync(self, name: str, paths: Sequence[str] | None = None, *,
                 max_file_bytes: int | None = None, hidden: bool | None = None,
                 rebuild: bool = False, vectors: bool | None = None,
                 progress: Progress | None = None,
                 announce: Callable[[int, int, bool], None] | None = None) -> dict[str, Any]:
        """Re-index what changed and drop what was deleted (`paths`: add them first)."""
        from agenvoy_cli import rag

        return rag.sync(self.store, name, None if paths is None else list(paths),
                        max_file_bytes=max_file_bytes, hidden=hidden, rebuild=rebuild,
                        vectors=vectors, progress=progress, announce=announce).as_dict()

    def rag_files(self, name: str, *, skipped: bool = False) -> dict[str, Any]:
        """The files of a database: format, state (and why skipped), bytes, chunk_count."""
        from agenvoy_cli import rag

        info = rag.list_files(self.store, name)
        files = info.pop("files_list")
        if skipped:
            files = [f for f in files if f["state"] == "skipped"]
        return {"database": info["name"], "summary": info, **listing("files", files)}

    def rag_remove(self, name: str) -> dict[str, Any]:
        """Delete a database: its rows and vectors (the files themselves are untouched)."""
        from agenvoy_cli import rag

        return rag.remove(self.store, name)
