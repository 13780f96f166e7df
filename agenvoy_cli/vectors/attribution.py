"""Attribution vectors kept beside the index: the vector of a message's own text.

Semantic search checks its top hits against their predecessors by the message text alone
(search/semantic.py, attribution): up to 10 texts of up to 600 characters, ~0.5 CPU-s with
the default model, every cold search. Those vectors do not depend on the query, so the
first search that needs one stores it in the metadata of that message's own vector entry
(key OWN_TEXT, float32, base64). Kept there they are derived data exactly as the message
vectors are: rebuilt, forgotten, trimmed and cleared with them (an entry re-added for a
changed message carries new metadata, so a stale vector cannot survive), and a second
search of the same messages embeds nothing but the query (tests/test_attribution_kept.py).

A Relevance (search/relevance.py) may keep vectors of message texts the same way under a key
of its own (Needs.kept): the built-in floor keeps its second model's, so that the messages
it compares a query with (the top hits and the session's background sample) are embedded by
it once.
"""

from __future__ import annotations

import base64
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from agenvoy_cli.vectors import context, exact, guard
from agenvoy_cli.vectors.collection import before_write, message_id, writing

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store

# metadata key of a message entry: the vector of its own text by the index's model (the
# key homes have been written with)
OWN_TEXT = "alone"
DECODED_KEPT = 8192  # decoded kept vectors a holder keeps (~2 KB each)


def _encode(vec: Sequence[float]) -> str:
    return base64.b64encode(array("f", vec).tobytes()).decode("ascii")


def _decode(text: str) -> Sequence[float]:
    return array("f", base64.b64decode(text))  # a sequence: no float objects made


def _name(store: Store, session_id: str) -> str:
    from agenvoy_cli.vectors.messages import collection_for

    return collection_for(session_id)


def _collection(store: Store, session_id: str) -> Any:
    from agenvoy_cli.vectors.api import index_exists
    from agenvoy_cli.vectors.collection import MESSAGES
    from agenvoy_cli.vectors.messages import message_index

    if not index_exists(store, MESSAGES):
        return None
    index = message_index(store, create=False).session(session_id)
    return None if index is None else index.collection


def _entries(store: Store, session_id: str, ids: Sequence[str]) -> dict[str, Any]:
    """The entries' metadata (from the kept matrix when the session is searched exactly)."""
    from agenvoy_cli.vectors.api import index_exists
    from agenvoy_cli.vectors.collection import MESSAGES
    from agenvoy_cli.vectors.messages import entries

    if not index_exists(store, MESSAGES):
        return {"ids": [], "metadatas": []}
    return entries(store, session_id, ids)


def load(store: Store, session_id: str, seqs: Sequence[int], key: str = OWN_TEXT
         ) -> dict[int, Sequence[float]]:
    """The kept vectors of these messages (those that have one) under `key`.
    Hold the write lock."""
    return load_keys(store, session_id, seqs, (key,))[key]


def load_keys(store: Store, session_id: str, seqs: Sequence[int], keys: Sequence[str]
              ) -> dict[str, dict[int, Sequence[float]]]:
    """Per key, the kept vectors of these messages, in one read. Hold the write lock."""
    out: dict[str, dict[int, Sequence[float]]] = {key: {} for key in keys}
    if not seqs:
        return out
    with guard.exclusive(store):
        got = _entries(store, session_id, [message_id(session_id, s) for s in seqs])
    decoded = context.of(store).decoded
    for meta in got.get("metadatas") or []:
        if not meta or "seq" not in meta:
            continue
        for key in keys:
            text = meta.get(key)
            if isinstance(text, str):
                out[key][int(meta["seq"])] = _decoded(decoded, text)
    return out


def _decoded(memo: OrderedDict[str, Sequence[float]], text: str) -> Sequence[float]:
    """The vector of a kept text, decoded once per holder: a warm search reads ~300 kept
    vectors (its hits, their neighbours, the background sample, for two models), ~30 us of
    base64 each. The text is the key (a kept copy's strings hash once: vectors/exact.py)."""
    found = memo.get(text)
    if found is None:
        found = memo[text] = _decode(text)
        if len(memo) > DECODED_KEPT:
            memo.popitem(last=False)
    else:
        memo.move_to_end(text)
    return found


def lacking(store: Store, session_id: str, seqs: Iterable[int], key: str = OWN_TEXT
            ) -> list[int]:
    """Those of these places that have a vector entry but no kept vector (under `key`), in
    order. Hold the write lock."""
    ids = [message_id(session_id, s) for s in seqs]
    if not ids:
        return []
    with guard.exclusive(store):
        got = _entries(store, session_id, ids)
    return sorted(int(meta["seq"]) for meta in got.get("metadatas") or []
                  if meta and "seq" in meta and not isinstance(meta.get(key), str))


def save(store: Store, session_id: str, vecs: dict[int, Sequence[float]],
         key: str = OWN_TEXT) -> int:
    """Keep these vectors in their messages' entries under `key` (entries gone meanwhile are
    skipped; an entry's other metadata stays as it is). Hold the write lock. How many were
    kept."""
    if not vecs:
        return 0
    with guard.exclusive(store):
        col = _collection(store, session_id)
        if col is None:
            return 0
        got = col.get(ids=[message_id(session_id, s) for s in vecs], include=["metadatas"])
        ids, metas = [], []
        for vid, meta in zip(got["ids"], got.get("metadatas") or []):
            seq = int((meta or {}).get("seq", -1))
            if seq in vecs:
                ids.append(vid)
                metas.append({**meta, key: _encode(vecs[seq])})
        if ids:
            name = _name(store, session_id)
            kept = exact.current(store, name)
            guard.bump(store)  # a write: other processes reload (vectors/guard.py)
            with writing(store, session_id):
                before_write("update")
                col.update(ids=ids, metadatas=metas)
            exact.patch(store, name, kept, update=dict(zip(ids, metas)))
    return len(ids)


class KeptEmbedder:
    """The embedder as attribution sees it: texts whose vector is kept are answered from
    it; the others are embedded and remembered in `new` (text -> vector) for save().
    With a `pacer` (search/catchup.py Pacer: what is left of a search's budget) only the
    texts that fit in it are embedded, in the order asked; the others are answered None
    (not known) and counted in `skipped`."""

    def __init__(self, inner: Any, kept: dict[str, Sequence[float]],
                 pacer: Any = None) -> None:
        self.inner = inner
        self.kept = kept
        self.pacer = pacer
        self.new: dict[str, Sequence[float]] = {}
        self.skipped: set[str] = set()

    @property
    def model_id(self) -> str:
        return str(self.inner.model_id)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)  # type: ignore[no-any-return]

    def embed_documents(self, texts: list[str]) -> list[Sequence[float] | None]:
        missing = [t for t in dict.fromkeys(texts) if t not in self.kept and t not in self.new]
        if missing and self.pacer is None:
            self.new.update(zip(missing, self.inner.embed_documents(missing)))
        while missing and self.pacer is not None:  # a small first batch, then what fits
            got = self.pacer.batch(self.inner.embed_documents, missing, keep_reserve=False)
            if not got:
                self.skipped.update(missing)
                break
            self.new.update(zip(missing, got))
            self.skipped.difference_update(missing[:len(got)])
            missing = missing[len(got):]
        return [self.kept.get(t) or self.new.get(t) for t in texts]
