"""What a store said, as benchd shows it: the one place its own words become text.

Every error a store causes carries the store's words, from here:
:func:`store_message` for an HTTP error answer (the message wherever the
common APIs put it, or an HTML or text page's text) and :func:`raised` for an
exception from an in-process store (a ``python`` retriever, a client
library). Both are one line, masked (:func:`benchd.redact.text`) *before*
they are cut to :data:`MESSAGE_CHARS`, so a key the store echoed is never left
half-shown. :mod:`benchd.http.client` puts them after the status
(``HTTP 422: ChromaError: missing field "embeddings" ...``).
"""

from __future__ import annotations

import html
import re
from typing import Any

from benchd import redact
from benchd.errors import TargetProtocolError
from benchd.http.answers import Body, loads

__all__ = ["MESSAGE_CHARS", "raised", "store_message", "words"]

_DETAIL_BYTES = 64 * 1024  # error bodies larger than this are not searched for a message

MESSAGE_CHARS = 300
"""Longest store message quoted in an error (after masking)."""

# Where stores put their words: Zengram and Express {"error"}, Chroma {"error": class,
# "message"}, FastAPI {"detail": str | [{"loc", "msg"}]}, Qdrant {"status": {"error"}},
# Milvus {"code", "message"}, Elasticsearch {"error": {"type", "reason"}}, JSON-RPC
# {"error": {"code", "message"}}, RFC 7807 {"title", "detail"}.
_MESSAGE_KEYS = ("message", "detail", "reason", "error_description", "msg", "description")
_NAME_KEYS = ("error", "type", "title")
_NESTED_KEYS = ("error", "status", "errors")
_IDENTIFIER = re.compile(r"^[A-Za-z_][\w.:-]{0,63}$")
# A run of 8+ key-like characters with a letter and a digit: what a refused key looks like.
_TOKEN = re.compile(r"[\w\-+/=.:]{8,}")
# A tag ends at its '>' or at the next '<': every character is looked at a bounded
# number of times, whatever a hostile page holds ("<" * 60000 took 8 s with <[^>]*>).
_TAG = re.compile(r"<[^<>]*>")
_BLOCKS = ("head", "script", "style")  # markup whose text is not the message
_SPACES = re.compile(r"\s+")


def store_message(body: Body, *, credentials: bool = True) -> str:
    """The store's own words in an error answer: one line, masked, at most 300 characters.

    From a JSON body, the message wherever the common API shapes put it (an
    error class with its message reads ``ChromaError: missing field ...``);
    from a text or HTML body, its text. ``""`` when there is none, or the
    body is too large, not UTF-8, or JSON too deep to read.
    ``credentials=False`` also hides every token that mixes letters and
    digits (what an auth answer may echo).
    """
    if not isinstance(body, bytes) or not body.strip() or len(body) > _DETAIL_BYTES:
        return ""
    try:
        text = _SPACES.sub(" ", _words(body)).strip()
    except (TargetProtocolError, UnicodeDecodeError):
        return ""
    if not credentials:
        text = _TOKEN.sub(_hidden, redact.mask(text))
    return _shown(text)


def _hidden(match: re.Match[str]) -> str:
    token = match.group(0)
    mixed = any(c.isdigit() for c in token) and any(c.isalpha() for c in token)
    return "<hidden>" if mixed else token


def _words(body: bytes) -> str:
    if body.lstrip()[:1] in (b"{", b"["):
        return _json_words(loads(body, ""), 0)
    text = body.decode("utf-8")
    if "<" in text and ">" in text:  # an HTML error page: its text, not its markup
        text = html.unescape(_TAG.sub(" ", _without_blocks(text)))
    return text


def _without_blocks(text: str) -> str:
    """``text`` without its ``<head>``, ``<script>`` and ``<style>`` elements, in one pass.

    Each tag's next opening is searched for again only once the scan has
    passed it, so the work stays linear in the page (a backreferencing regex
    took 7 s on a 63 KB page of unclosed ``<script>`` tags).
    """
    lower = text.lower()
    kept: list[str] = []
    at = 0
    opens = {tag: lower.find(f"<{tag}") for tag in _BLOCKS}
    while True:
        found = [(start, tag) for tag, start in opens.items() if start >= 0]
        if not found:
            break
        start, tag = min(found)
        kept.append(text[at:start])
        close = lower.find(f"</{tag}", start)
        end = lower.find(">", close) if close >= 0 else -1
        if end < 0:  # unclosed: the rest is that element
            return " ".join(kept)
        at = end + 1
        for name, position in opens.items():
            if 0 <= position < at:
                opens[name] = lower.find(f"<{name}", at)
    kept.append(text[at:])
    return " ".join(kept)


def _json_words(data: Any, depth: int) -> str:
    if depth > 3:
        return ""
    if isinstance(data, str):
        return data
    if isinstance(data, list):
        parts = (_json_words(item, depth + 1) for item in data[:3])
        return "; ".join(p for p in parts if p)
    if not isinstance(data, dict):
        return ""
    message = next((m for k in _MESSAGE_KEYS if (m := _json_words(data.get(k), depth + 1))), "")
    if message and isinstance(data.get("loc"), list):  # FastAPI: where in the request
        message = f"{'.'.join(map(str, data['loc']))}: {message}"
    name = next((str(data[k]) for k in _NAME_KEYS if _is_name(data.get(k))), "")
    if message:
        return f"{name}: {message}" if name and name not in message else message
    for key in _NESTED_KEYS:
        nested = data.get(key)
        if isinstance(nested, dict | list) and (inner := _json_words(nested, depth + 1)):
            return inner
    error = data.get("error")
    return error if isinstance(error, str) else name


def _is_name(value: Any) -> bool:
    """An error class (``ChromaError``, ``invalid_argument``), not a sentence."""
    return isinstance(value, str) and bool(_IDENTIFIER.match(value))


def raised(exc: BaseException) -> str:
    """``ValueError: missing field "embeddings"``: an in-process store's exception as words."""
    return words(f"{type(exc).__name__}: {exc}")


def words(text: str) -> str:
    """Any text a store said (a JSON-RPC error, a tool's message) as benchd shows it."""
    return _shown(_SPACES.sub(" ", text).strip())


def _shown(text: str) -> str:
    # masked before the cut, so a key the store echoed is never left half-shown
    return redact.text(text, MESSAGE_CHARS, one_line=True)
