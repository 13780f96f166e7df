"""Writing and reading error records: SQLite first (the truth), Chroma after (derived)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson

from agenvoy_cli.errormem import records
from agenvoy_cli.errormem.classify import check_type
from agenvoy_cli.errormem.records import (
    CATCH_UP_BATCH,
    COLUMNS,
    HEX,
    MIN_PREFIX,
    OUTCOMES,
    Draft,
    Record,
    Warn,
    quiet,
    record_id,
    semantic_default,
    tokens_of,
    ttl_ns,
    vector_meta,
)
from agenvoy_cli.errors import AgenvoyError, BadInput, NotFound

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store


def embed(store: Store, texts: list[str]) -> tuple[list[list[float]], str]:
    """Vectors of texts (identical texts embedded once) and the model id. Outside the lock."""
    from agenvoy_cli.vectors import api as vectors

    emb = vectors.embedder(store)
    unique = list(dict.fromkeys(texts))
    found = dict(zip(unique, emb.embed_documents(unique)))
    return [found[t] for t in texts], emb.model_id


def warm_chroma() -> None:
    from agenvoy_cli.vectors.hooks import preload

    preload()


def record(store: Store, drafts: Sequence[Draft], *, semantic: bool | None = None,
           now: int | None = None, warn: Warn = quiet) -> list[Record]:
    """Store validated records: SQLite first (one transaction, all or nothing), then their
    vectors. A vector failure never loses a record: it warns, and repair embeds it later."""
    if not drafts:
        raise BadInput("no records to store")
    now = records.now_ns() if now is None else now
    ttl = ttl_ns(store)
    use_vectors = semantic_default(store) if semantic is None else semantic
    vecs: list[list[float]] | None = None
    model: str | None = None
    if use_vectors:
        try:
            vecs, model = embed(store, [d.document() for d in drafts])
            warm_chroma()
        except Exception as exc:  # noqa: BLE001 - the record matters more than its vector
            warn(f"agenvoy: warning: no vectors for these records ({one_line(exc)}); "
                 "lookups rank them by keywords until `agenvoy doctor --repair`")
            vecs = None
    with store.write_lock():
        ids: list[str] = []
        with store.transaction() as conn:
            created = now
            for draft in drafts:
                rid = record_id(draft.tool_name, created)
                while conn.execute("SELECT 1 FROM error_records WHERE id = ?",
                                   (rid,)).fetchone():
                    created += 1  # same tool in the same nanosecond: next one
                    rid = record_id(draft.tool_name, created)
                kw_tokens, text_tokens = tokens_of(draft)
                cur = conn.execute(
                    "INSERT INTO error_records (id, tool_name, keywords, error_type, symptom, "
                    "cause, action, outcome, created_at, expires_at, kw_tokens, text_tokens) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (rid, draft.tool_name, orjson.dumps(list(draft.keywords)).decode(),
                     draft.error_type, draft.symptom, draft.cause, draft.action, draft.outcome,
                     created, created + ttl, kw_tokens, text_tokens))
                conn.executemany("INSERT INTO error_keywords (keyword, seq) VALUES (?, ?)",
                                 [(k, cur.lastrowid) for k in draft.keywords])
                ids.append(rid)
                created += 1
        if vecs is not None:
            try:
                add_vectors(store, ids, vecs, [vector_meta(d) for d in drafts], model)
            except Exception as exc:  # noqa: BLE001
                warn(f"agenvoy: warning: records stored, but the vector index was not "
                     f"updated ({one_line(exc)}); run `agenvoy doctor --repair`")
        return by_ids(store.db(), ids)


def add_vectors(store: Store, ids: list[str], vecs: list[list[float]],
                 metas: list[dict[str, Any]], model: str | None) -> None:
    """Hold write_lock. Chroma first, then the flag in SQLite (a crash in between leaves a
    vector whose record says 'none': repair re-embeds it, an upsert)."""
    from agenvoy_cli.vectors import api as vectors

    index = vectors.open_index(store, vectors.ERRORS)
    if index.embedder.model_id != model:
        raise AgenvoyError(f"the embedder changed to {index.embedder.model_id} meanwhile")
    index.add(ids, vecs, metas)
    with store.transaction() as conn:
        conn.executemany("UPDATE error_records SET vector_model = ? WHERE id = ?",
                         [(model, i) for i in ids])


def one_line(exc: BaseException | str) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:299] + "…"


# --------------------------------------------------------------------------- reading


def fetch(conn: sqlite3.Connection, where: str, params: Sequence[Any] = (), *,
           order: str = "created_at DESC, seq DESC", limit: int | None = None) -> list[Record]:
    sql = f"SELECT {COLUMNS} FROM error_records WHERE {where} ORDER BY {order}"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return [Record.from_row(r) for r in conn.execute(sql, tuple(params))]


def by_ids(conn: sqlite3.Connection, ids: Sequence[str], extra: str = "",
            params: Sequence[Any] = ()) -> list[Record]:
    """Records with these ids (any number: queried in chunks), in the order of ids."""
    out: dict[str, Record] = {}
    for i in range(0, len(ids), 500):
        chunk = list(ids[i:i + 500])
        where = f"id IN ({','.join('?' * len(chunk))}){extra}"
        out.update((r.id, r) for r in fetch(conn, where, [*chunk, *params], order="seq"))
    return [out[i] for i in ids if i in out]


def resolve(conn: sqlite3.Connection | None, ref: str, now: int) -> Record:
    """A live record by id or unique id prefix (>= 6 hex digits)."""
    key = (ref or "").strip().lower()
    if not HEX.match(key) or len(key) > 64:
        raise BadInput(f"{ref!r} is not an error record id (hexadecimal, as `errors list` "
                       "shows)")
    if len(key) < MIN_PREFIX:
        raise BadInput(f"id prefix {ref!r} is too short (at least {MIN_PREFIX} digits)")
    rows = [] if conn is None else fetch(
        conn, "id >= ? AND id < ?", (key, key + "g"), limit=3)
    live = [r for r in rows if r.expires_at > now]
    if not live:
        expired = " (it has expired)" if rows else ""
        raise NotFound(f"no error record {ref!r}{expired}")
    if len(live) > 1:
        raise BadInput(f"id prefix {ref!r} is ambiguous: "
                       + ", ".join(r.short_id for r in live))
    return live[0]


def get(store: Store, ref: str, *, now: int | None = None) -> Record:
    now = records.now_ns() if now is None else now
    conn = store.db_readonly()  # before the shared lock: it may upgrade the schema
    with store.read_lock():
        return resolve(conn, ref, now)


def list_records(store: Store, *, tool: str | None = None, outcome: str | None = None,
                 error_type: str | None = None, limit: int | None = None,
                 now: int | None = None) -> list[Record]:
    """Live records, newest first (no renewal: listing is not a hit)."""
    now = records.now_ns() if now is None else now
    if outcome is not None and outcome not in OUTCOMES:
        raise BadInput(f"outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
    error_type = check_type(error_type)
    where, params = ["expires_at > ?"], [now]
    for column, value in (("tool_name", tool), ("outcome", outcome),
                          ("error_type", error_type)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    conn = store.db_readonly()  # before the shared lock: it may upgrade the schema
    if conn is None:
        return []
    with store.read_lock():
        return fetch(conn, " AND ".join(where), params, limit=limit)



# --------------------------------------------------------------------------- deleting


def delete_vectors(store: Store, ids: list[str], warn: Warn) -> None:
    """Hold write_lock. Vectors go before their rows, so Chroma is never ahead of SQLite;
    a failure only leaves stale vectors, which lookups ignore and repair deletes."""
    if not ids or not vector_dir_exists(store):
        return
    try:
        from agenvoy_cli.vectors import api as vectors

        if vectors.index_exists(store, vectors.ERRORS):
            vectors.open_index(store, vectors.ERRORS, create=False).delete(ids)
    except Exception as exc:  # noqa: BLE001
        warn(f"agenvoy: warning: vectors not deleted ({one_line(exc)}); "
             "`agenvoy doctor --repair` removes them")


def vector_dir_exists(store: Store) -> bool:
    from agenvoy_cli.vectors.location import has_vectors

    return has_vectors(store)


def forget(store: Store, ref: str, *, now: int | None = None, warn: Warn = quiet) -> Record:
    now = records.now_ns() if now is None else now
    if not store.layout.db.exists():
        resolve(None, ref, now)
    with store.write_lock():
        rec = resolve(store.db(), ref, now)
        if rec.vector_model is not None:
            delete_vectors(store, [rec.id], warn)
        with store.transaction() as conn:
            conn.execute("DELETE FROM error_records WHERE seq = ?", (rec.seq,))
        return rec


def prune(store: Store, *, now: int | None = None, dry_run: bool = False,
          warn: Warn = quiet) -> list[Record]:
    """Remove expired records (and their vectors); returns them."""
    now = records.now_ns() if now is None else now
    if not store.layout.db.exists():
        return []
    with store.write_lock():
        expired = fetch(store.db(), "expires_at <= ?", (now,), order="expires_at, seq")
        if dry_run or not expired:
            return expired
        delete_vectors(store, [r.id for r in expired if r.vector_model is not None], warn)
        with store.transaction() as conn:
            conn.executemany("DELETE FROM error_records WHERE seq = ?",
                             [(r.seq,) for r in expired])
        from agenvoy_cli.home import sqlite as sqlite_mod

        sqlite_mod.reclaim_space(store.db())
        return expired


def catch_up(store: Store, now: int, budget: float | None, warn: Warn) -> int:
    """Embed live records that have no vector yet (recorded with --no-semantic, or while no
    embedder was available), for at most `budget` seconds of embedding; how many are left
    (they are still matched by keywords)."""
    with store.read_lock():
        conn = store.db_readonly()
        todo = fetch(conn, "vector_model IS NULL AND expires_at > ?", (now,),
                     order="seq") if conn is not None else []
    if not todo or budget == 0:
        return len(todo)
    from agenvoy_cli.vectors.budget import embed_within

    def step(batch: list[Record]) -> None:
        drafts = [Draft(r.tool_name, tuple(r.keywords), r.error_type, r.symptom, r.cause,
                        r.action, r.outcome) for r in batch]
        vecs, model = embed(store, [d.document() for d in drafts])
        with store.write_lock():
            alive = {r.id for r in by_ids(store.db(), [r.id for r in batch])}
            keep = [n for n, r in enumerate(batch) if r.id in alive]
            if keep:
                add_vectors(store, [batch[n].id for n in keep], [vecs[n] for n in keep],
                            [vector_meta(drafts[n]) for n in keep], model)

    done = embed_within(store, todo, CATCH_UP_BATCH, budget, step, warn,
                        "could not embed the records without a vector; they are matched by "
                        "keywords")
    return len(todo) - done


# -- the writes the other rooms need (error_records and its indexes have this one owner) ---
def renew(store: Store, seqs: Sequence[int], now: int, ttl: int) -> None:
    """A lookup's hits: expiry pushed to now + ttl, one more hit, last hit now."""
    with store.transaction() as tx:
        tx.executemany("UPDATE error_records SET expires_at = ?, hits = hits + 1, "
                       "last_hit_at = ? WHERE seq = ?", [(now + ttl, now, s) for s in seqs])


def check_fts(conn: sqlite3.Connection) -> str | None:
    """FTS5's integrity check of error_records_fts (writes nothing): the error, or None."""
    try:
        conn.execute("INSERT INTO error_records_fts(error_records_fts) "
                     "VALUES ('integrity-check')")
    except sqlite3.DatabaseError as exc:
        return str(exc)
    return None


def rebuild_fts(store: Store) -> None:
    with store.transaction() as conn:
        conn.execute("INSERT INTO error_records_fts(error_records_fts) VALUES ('rebuild')")


def restore_keywords(store: Store, seqs: Sequence[int]) -> None:
    """The error_keywords rows of these records, from their keywords column."""
    with store.transaction() as conn:
        for seq in seqs:
            words = conn.execute("SELECT keywords FROM error_records WHERE seq = ?",
                                 (seq,)).fetchone()[0]
            conn.executemany("INSERT OR IGNORE INTO error_keywords (keyword, seq) VALUES (?, ?)",
                             [(k, seq) for k in orjson.loads(words)])


def unflag_vectors(store: Store, ids: Sequence[str] | None = None) -> None:
    """Mark records as having no vector (ids None: every record)."""
    with store.transaction() as conn:
        if ids is None:
            conn.execute("UPDATE error_records SET vector_model = NULL")
        else:
            conn.executemany("UPDATE error_records SET vector_model = NULL WHERE id = ?",
                             [(i,) for i in ids])


def column_values(conn: sqlite3.Connection, column: str) -> list[str]:
    """Every distinct tool_name or id of the records, sorted (shell completion)."""
    if column not in ("tool_name", "id"):
        raise ValueError(column)
    return [r[0] for r in conn.execute(
        f"SELECT DISTINCT {column} FROM error_records ORDER BY {column}")]
