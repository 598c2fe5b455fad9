"""API keys: read from the environment or a file, never from config text.

A :class:`Secret` never shows its value in ``repr``/``str``; every secret
read is registered with :mod:`benchd.redact`, so it is masked in every log
line, table, JSON document, endpoint and error message.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from benchd.errors import ConfigError
from benchd.inputs import MAX_SECRET_FILE_BYTES, read_input
from benchd.redact import register_secret

__all__ = ["Secret", "read_secret"]


@dataclass(frozen=True, slots=True)
class Secret:
    """A credential whose value is only reachable through :meth:`reveal`."""

    _value: str = field(repr=False)
    # Where it came from, as the config says it: "api_key_env NAME" or "api_key_file PATH"
    # (the path as written, ${VAR} unexpanded: see config.load) — safe to show.
    source: str = ""

    def reveal(self) -> str:
        return self._value

    def __str__(self) -> str:
        return f"<secret from {self.source}>"

    def __repr__(self) -> str:
        return f"Secret(source={self.source!r})"


def read_secret(
    *, env: str | None, file: str | None, where: str, kind: str = "API key"
) -> Secret | None:
    """Read a key from ``$env`` or ``file``; ``where`` names the config location and
    ``kind`` what the secret is (an API key, a DSN with its password, a token)."""
    if env and file:
        raise ConfigError(f"{where}: set api_key_env or api_key_file, not both")
    if env:
        value = os.environ.get(env)
        if not value:
            raise ConfigError(
                f"{where}: environment variable {env} is not set or empty; "
                f"export {env}=<{kind}> before starting benchd"
            )
        secret = Secret(value.strip(), f"api_key_env {env}")
    elif file:
        try:
            value = read_input(file, limit=MAX_SECRET_FILE_BYTES).decode("utf-8").strip()
        except OSError as exc:
            raise ConfigError(
                f"{where}: cannot read api_key_file {file}: {exc.strerror or exc}"
            ) from None
        except ValueError as exc:  # not a regular file, too large, or not UTF-8
            problem = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else str(exc)
            raise ConfigError(f"{where}: api_key_file {file}: {problem}") from None
        if not value:
            raise ConfigError(f"{where}: api_key_file {file} is empty")
        secret = Secret(value, f"api_key_file {file}")
    else:
        return None
    register_secret(secret.reveal())
    return secret
