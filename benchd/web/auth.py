"""Checking credentials for benchd's endpoints, at a bounded and user-blind cost.

* **Same cost for every user name.** An unknown user is checked against a
  dummy hash of the same kind and cost as the configured ones, so timing
  does not tell which user names exist.
* **Bounded.** Expensive (bcrypt) checks run one at a time in their own
  worker thread, apart from the threads that render ``/metrics``, and at most
  :data:`MAX_WAITING` wait for a turn (beyond: ``429``). A flood of wrong
  passwords so costs one core at most and never queues behind a scrape.
* **Cached.** A header that passed is remembered (as a SHA-256 digest), so a
  scraper pays bcrypt's cost once, not every scrape; a reload that changes
  the users starts a new, empty cache.
* Over-long passwords (beyond bcrypt's 72 bytes) and malformed headers are
  a plain ``401``, never an error.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import importlib
from collections import OrderedDict
from enum import Enum
from types import ModuleType

import anyio

from benchd.config.web import BCRYPT_MAX_BYTES, WebAuth, bcrypt_cost, is_bcrypt

__all__ = ["MAX_WAITING", "Authenticator", "Verdict", "hash_secret"]

MAX_WAITING = 16  # expensive checks queued at once; more answer 429 at once
_CACHE_SIZE = 64


def hash_secret(secret: str) -> str:
    """A ``sha256:<hex>`` hash for ``web_config`` (fine for long random tokens;
    prefer bcrypt hashes for passwords people choose)."""
    return "sha256:" + hashlib.sha256(secret.encode()).hexdigest()


def _bcrypt() -> ModuleType:
    return importlib.import_module("bcrypt")


def verify(secret: str, stored: str) -> bool:
    """Compare ``secret`` with a stored hash in constant time (bcrypt is slow on purpose)."""
    if is_bcrypt(stored):
        encoded = secret.encode()
        if len(encoded) > BCRYPT_MAX_BYTES:
            return False
        return bool(_bcrypt().checkpw(encoded, stored.encode()))
    return hmac.compare_digest(hash_secret(secret), stored)


class Verdict(Enum):
    """The outcome of checking one ``Authorization`` header."""

    GRANTED = "granted"
    DENIED = "denied"
    BUSY = "busy"  # too many checks waiting: try again shortly


class Authenticator:
    """Checks ``Authorization`` headers against one :class:`WebAuth`.

    Built off the event loop (it may compute a bcrypt dummy hash): use
    ``await anyio.to_thread.run_sync(Authenticator, auth)`` in async code.
    """

    def __init__(self, auth: WebAuth) -> None:
        self.auth = auth
        costs = [bcrypt_cost(h) for h in (*auth.basic_users.values(), *auth.bearer_tokens)]
        self.expensive = max(costs, default=0) > 0
        if any(bcrypt_cost(h) for h in auth.basic_users.values()):
            cost = max(bcrypt_cost(h) for h in auth.basic_users.values())
            salt = _bcrypt().gensalt(rounds=cost)
            self._dummy = _bcrypt().hashpw(b"benchd: no such user", salt).decode()
        else:
            self._dummy = hash_secret("benchd: no such user")
        self._granted: OrderedDict[bytes, None] = OrderedDict()
        self._limiter = anyio.CapacityLimiter(1)
        self._waiting = 0

    @property
    def challenge(self) -> str:
        """The ``WWW-Authenticate`` value a 401 carries."""
        if self.auth.basic_users:
            return 'Basic realm="benchd", charset="UTF-8"'
        return 'Bearer realm="benchd"'

    def check(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header value grants access (blocking)."""
        scheme, _, credentials = (authorization or "").partition(" ")
        credentials = credentials.strip()
        if scheme.lower() == "bearer" and self.auth.bearer_tokens:
            # Compare against every token (no early exit) to keep the timing flat.
            return any([verify(credentials, stored) for stored in self.auth.bearer_tokens])
        if scheme.lower() == "basic" and self.auth.basic_users:
            pair = _decode_basic(credentials)
            return pair is not None and self._check_basic(*pair)
        return False

    def _check_basic(self, user: str, password: str) -> bool:
        stored = self.auth.basic_users.get(user)
        ok = verify(password, stored if stored is not None else self._dummy)
        return ok and stored is not None

    async def verdict(self, authorization: str | None) -> Verdict:
        """Check a header without blocking the event loop, bounded as the module says."""
        if not authorization:
            return Verdict.DENIED
        key = hashlib.sha256(authorization.encode("utf-8", "surrogateescape")).digest()
        if key in self._granted:
            self._granted.move_to_end(key)
            return Verdict.GRANTED
        if not self.expensive:
            ok = self.check(authorization)
        elif self._waiting >= MAX_WAITING:
            return Verdict.BUSY
        else:
            self._waiting += 1
            try:
                ok = await anyio.to_thread.run_sync(
                    self.check, authorization, limiter=self._limiter
                )
            finally:
                self._waiting -= 1
        if not ok:
            return Verdict.DENIED
        self._granted[key] = None
        if len(self._granted) > _CACHE_SIZE:
            self._granted.popitem(last=False)
        return Verdict.GRANTED


def _decode_basic(credentials: str) -> tuple[str, str] | None:
    try:
        text = base64.b64decode(credentials, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    user, sep, password = text.partition(":")
    return (user, password) if sep else None
