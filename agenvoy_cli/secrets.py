"""The one secret-masking function. Every message that can reach stderr, stdout or a log
goes through mask(): every configured key, wherever it appears (a server may echo it), and
credentials written into URLs."""

from __future__ import annotations

import re

MASK = "****"
# Environment variables whose value is a secret (keys for the LLM, the embedder, a Chroma
# server, ...): their values are masked even when nobody registered them.
# The patterns are compiled on first use (re.compile keeps them in re's cache), not at import.
_SECRET_NAME = r"(?i)(?:API_?KEY|_KEY|_TOKEN|_SECRET|_PASSWORD|_PASSWD)$"
_MIN_SECRET = 6  # shorter values would mask ordinary words
# Secrets learnt while running (a key named by agenvoy.llm.api_key_env, a URL's password from
# config.json, the Basic token made of it). Process-wide on purpose (tests/test_architecture.py
# KNOWN_STATE): what it guards, this process's stderr, stdout and logs, is written from every
# layer (output.warn, the CLI's error handler) with no caller's object at hand, and a secret
# learnt once must stay masked in every later message, whoever learnt it.
_registered: set[str] = set()
# scheme://user:password@host or scheme://token@host
_URL_USERINFO = r"(?i)\b([a-z][a-z0-9+.-]*://)([^\s/@:?#]*)(?::([^\s/@?#]*))?@"
_URL_PARAM = r"(?i)([?&](?:api[_-]?key|key|token|access_token|password)=)[^&#\s]+"
# an Authorization value: a word of 8+ token characters with at least one non-letter in it
# (so "Basic information" stays prose)
_AUTH_VALUE = (
    r"\b(Bearer|Basic)(\s+)(?=[A-Za-z0-9._~+/=-]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]{8,}")


def register(secret: str | None) -> None:
    """Remember a secret that did not come from a *_KEY/*_TOKEN variable (e.g. the variable
    named by agenvoy.llm.api_key_env) so that mask() hides it too."""
    if secret and len(secret) >= _MIN_SECRET:
        _registered.add(secret)


def known_secrets() -> list[str]:
    from agenvoy_cli.environment import environment

    values = set(_registered)
    for name, value in environment().items():
        if len(value) >= _MIN_SECRET and re.compile(_SECRET_NAME).search(name):
            values.add(value)
    return sorted(values, key=len, reverse=True)  # longest first: no half-masked overlaps


def _userinfo(match: re.Match[str]) -> str:
    scheme, user, password = match.group(1), match.group(2), match.group(3)
    return f"{scheme}{user}:{MASK}@" if password is not None else f"{scheme}{MASK}@"


def register_url(url: str | None) -> None:
    """Register the password (or token) written into a URL's user part."""
    if url and "@" in url:
        match = re.compile(_URL_USERINFO).search(url)
        if match:
            register(match.group(3) if match.group(3) is not None else match.group(2))


def mask(text: str, *, patterns: bool = True) -> str:
    """`text` with every known secret masked and, with `patterns` (messages, not data), every
    URL credential and Authorization value too. Results printed on stdout use
    patterns=False: a stored message that merely looks like a URL with a user stays as is."""
    if not text:
        return text
    for secret in known_secrets():
        if secret in text:
            text = text.replace(secret, MASK)
    if not patterns:
        return text
    if "@" in text:
        text = re.compile(_URL_USERINFO).sub(_userinfo, text)
    if "=" in text:
        text = re.compile(_URL_PARAM).sub(lambda m: m.group(1) + MASK, text)
    return re.compile(_AUTH_VALUE).sub(lambda m: m.group(1) + m.group(2) + MASK, text)
