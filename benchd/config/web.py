"""``[server] web_config``: who may call benchd's endpoints, and its TLS certificate.

The file is TOML in the spirit of the Prometheus exporter-toolkit web config::

    [basic_auth_users]              # user = bcrypt or sha256:<hex> hash, never a password
    prometheus = "$2b$12$..."
    bearer_token_hashes = ["sha256:..."]
    [tls_server_config]             # PEM files, relative to this file
    cert_file = "benchd.crt"
    key_file = "benchd.key"
    [http_server_config]            # who may address benchd, and through what
    allowed_hosts = ["benchd.example.org"]   # Host names accepted besides IPs and localhost
    trusted_proxies = ["10.0.0.0/8"]         # whose X-Forwarded-For / -Proto are believed

It is decoded with the rest of the config (so ``benchd validate`` checks it
and every reload re-reads it): hashes are checked for their format, the
certificate pair is loaded once. Checking a password against a hash is the
web server's job (:mod:`benchd.web.auth`); this module only decodes.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import re
import ssl
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchd.errors import ConfigError
from benchd.inputs import MAX_CONFIG_BYTES, read_input
from benchd.redact import register_secret

__all__ = [
    "BCRYPT_MAX_BYTES",
    "WebAuth",
    "WebConfig",
    "WebHttp",
    "WebTLS",
    "bcrypt_cost",
    "is_bcrypt",
    "read_web_config",
]

BCRYPT_MAX_BYTES = 72  # bcrypt ignores (bcrypt>=5 refuses) longer passwords
_BCRYPT = re.compile(r"^\$2[aby]\$(\d\d)\$[./A-Za-z0-9]{53}$")
_SHA256 = re.compile(r"^sha256:[0-9a-fA-F]{64}$")
_KEYS = frozenset(
    {"basic_auth_users", "bearer_token_hashes", "tls_server_config", "http_server_config"}
)
_TLS_KEYS = frozenset({"cert_file", "key_file"})
_HTTP_KEYS = frozenset({"allowed_hosts", "trusted_proxies"})
_HOST_NAME = re.compile(r"^(\*|(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9-]{1,63})*\.?)$")


def is_bcrypt(stored: str) -> bool:
    return stored.startswith(("$2a$", "$2b$", "$2y$"))


def bcrypt_cost(stored: str) -> int:
    """The cost (log2 rounds) of a bcrypt hash; 0 for anything else."""
    match = _BCRYPT.match(stored)
    return int(match.group(1)) if match else 0


def _hash_problem(stored: str) -> str | None:
    if is_bcrypt(stored):
        match = _BCRYPT.match(stored)
        if match is None or not 4 <= int(match.group(1)) <= 31:
            return "malformed bcrypt hash; expected $2b$<cost 04-31>$<53 characters>"
        if importlib.util.find_spec("bcrypt") is None:
            return (
                "a bcrypt hash needs the 'bcrypt' package (pip install bcrypt) "
                "or use a sha256:<hex> hash"
            )
        return None
    if not _SHA256.match(stored):
        return (
            "unsupported hash; use a bcrypt hash ($2b$...) or "
            "sha256:<64 hex digits of the SHA-256 of the secret>"
        )
    return None


@dataclass(frozen=True, slots=True)
class WebAuth:
    """Who may call benchd's endpoints: basic-auth users and/or bearer tokens, all hashed."""

    basic_users: Mapping[str, str] = field(default_factory=dict)  # user -> hash
    bearer_tokens: tuple[str, ...] = ()  # hashes
    source: str = "web_config"

    def __post_init__(self) -> None:
        if not self.basic_users and not self.bearer_tokens:
            raise ConfigError(
                f"{self.source}: no basic_auth_users and no bearer_token_hashes; "
                "add one or remove server.web_config"
            )
        for user, stored in self.basic_users.items():
            if not user or ":" in user:
                raise ConfigError(
                    f"{self.source}: basic_auth_users.{user}: a user name must be non-empty "
                    "and hold no ':' (basic auth splits user and password at the first ':')"
                )
            if problem := _hash_problem(stored):
                raise ConfigError(f"{self.source}: basic_auth_users.{user}: {problem}")
        for i, stored in enumerate(self.bearer_tokens):
            if problem := _hash_problem(stored):
                raise ConfigError(f"{self.source}: bearer_token_hashes[{i}]: {problem}")


@dataclass(frozen=True, slots=True)
class WebTLS:
    """A server certificate (chain) and its private key, as PEM files."""

    cert_file: Path
    key_file: Path
    source: str = "web_config"

    def context(self) -> ssl.SSLContext:
        """A TLS 1.2+ server context; an unreadable or mismatched pair is a ConfigError."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or exc
            raise ConfigError(
                f"{self.source}: tls_server_config: cannot load cert_file {self.cert_file} "
                f"with key_file {self.key_file} ({reason}); give PEM files of one key pair"
            ) from None
        return context


@dataclass(frozen=True, slots=True)
class WebHttp:
    """``[http_server_config]``: Host names benchd answers to, proxies it believes.

    ``allowed_hosts`` adds names to what a loopback listener (every route)
    and every POST accept in ``Host``: IP literals and ``localhost`` always
    pass (DNS rebinding needs a name). ``*`` accepts any; ``*.example.org``
    any name under it. ``trusted_proxies`` are addresses or networks whose
    ``X-Forwarded-For`` and ``X-Forwarded-Proto`` are believed; without
    them benchd believes no forwarding header (whatever the environment's
    ``FORWARDED_ALLOW_IPS`` says).
    """

    allowed_hosts: tuple[str, ...] = ()
    trusted_proxies: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WebConfig:
    """What a ``web_config`` file asks for: authentication, TLS, HTTP policy."""

    auth: WebAuth | None = None
    tls: WebTLS | None = None
    source: str = ""
    http: WebHttp = field(default_factory=WebHttp)


def read_web_config(path: str | Path, *, load_tls: bool = False) -> WebConfig:
    """Read and check a ``web_config`` TOML file (paths in it are relative to it).

    ``load_tls`` also loads the certificate pair once, so a bad pair is
    reported where the config is checked rather than when serving starts.
    """
    source = str(path)
    try:
        data = tomllib.loads(read_input(path, limit=MAX_CONFIG_BYTES).decode("utf-8"))
    except OSError as exc:
        raise ConfigError(
            f"{source}: cannot read web config: {exc.strerror or exc}; "
            "fix server.web_config or remove it"
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: web config is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: invalid TOML: {exc}") from None
    except ValueError as exc:  # not a regular file, too large, a 4,300+ digit integer
        problem = (
            "invalid TOML: an integer with thousands of digits" if "digits" in str(exc) else exc
        )
        raise ConfigError(f"{source}: {problem}") from None
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise ConfigError(
            f"{source}: unknown key {unknown[0]!r}; expected basic_auth_users, "
            "bearer_token_hashes, [tls_server_config] and/or [http_server_config]"
        )
    tls = None
    if "tls_server_config" in data:
        tls = _tls(data["tls_server_config"], source, Path(path).resolve().parent)
        if load_tls:
            tls.context()
    http = _http(data.get("http_server_config", {}), source)
    auth = None
    alone = tls is None and "http_server_config" not in data
    if alone or "basic_auth_users" in data or "bearer_token_hashes" in data:
        auth = _auth(data, source)
    return WebConfig(auth=auth, tls=tls, source=source, http=http)


def _http(table: object, source: str) -> WebHttp:
    where = f"{source}: http_server_config"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table (allowed_hosts, trusted_proxies)")
    unknown = sorted(set(table) - _HTTP_KEYS)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r}; expected allowed_hosts and/or trusted_proxies"
        )
    hosts, proxies = table.get("allowed_hosts", []), table.get("trusted_proxies", [])
    for key, value in (("allowed_hosts", hosts), ("trusted_proxies", proxies)):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}.{key}: must be a list of strings")
    for i, host in enumerate(hosts):
        if not _HOST_NAME.match(host):
            raise ConfigError(
                f"{where}.allowed_hosts[{i}]: not a host name (letters, digits, '-', '.'; "
                "a leading '*.' for a domain, or '*' for any); give the name without a port"
            )
    for i, proxy in enumerate(proxies):
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            raise ConfigError(
                f"{where}.trusted_proxies[{i}]: not an IP address or network (10.0.0.0/8, ::1)"
            ) from None
    return WebHttp(
        allowed_hosts=tuple(h.lower().rstrip(".") for h in hosts), trusted_proxies=tuple(proxies)
    )


def _tls(table: object, source: str, base: Path) -> WebTLS:
    where = f"{source}: tls_server_config"
    if not isinstance(table, dict):
        raise ConfigError(f'{where}: must be a table with cert_file = "..." and key_file = "..."')
    unknown = sorted(set(table) - _TLS_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; expected cert_file and key_file")
    files = [table.get(name) for name in ("cert_file", "key_file")]
    if not all(isinstance(f, str) and f for f in files):
        raise ConfigError(f"{where}: cert_file and key_file are both required (paths to PEM files)")
    cert, key = (base / Path(str(f)).expanduser() for f in files)
    return WebTLS(cert_file=cert, key_file=key, source=source)


def _auth(data: dict[str, Any], source: str) -> WebAuth:
    users = data.get("basic_auth_users", {})
    tokens = data.get("bearer_token_hashes", [])
    if not isinstance(users, dict) or not all(isinstance(v, str) for v in users.values()):
        raise ConfigError(f'{source}: basic_auth_users must be a table of user = "hash"')
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise ConfigError(f"{source}: bearer_token_hashes must be a list of hash strings")
    for stored in (*users.values(), *tokens):  # a hash lets anyone guess offline: never shown
        if isinstance(stored, str):
            register_secret(stored)
    return WebAuth(basic_users=dict(users), bearer_tokens=tuple(tokens), source=source)
