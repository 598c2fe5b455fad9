"""benchd's TOML configuration: strict, typed, frozen.

``load_config(path)`` reads the file with :mod:`tomllib`, expands ``${VAR}``
from the environment in every string (``$$`` is a literal ``$``), decodes
each table into frozen dataclasses (unknown keys are errors naming the file
and key path), decodes ``[probe.target]`` with its kind's own config type
from :data:`benchd.kinds.TARGET_KINDS`, and reads API keys from the
environment or a file. Fixture paths are relative to the config file.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from benchd.config.budget import BudgetSettings
from benchd.config.drift import DriftSettings
from benchd.config.kinds import CommonSettings, target_kinds
from benchd.config.profiles import LoadProfile
from benchd.config.schema import check, decode, hidden_paths, join_key
from benchd.config.secrets import Secret, read_secret
from benchd.config.thresholds import (
    Threshold,
    ThresholdSettings,
    check_threshold,
    threshold_problem,
)
from benchd.config.web import WebConfig, read_web_config
from benchd.errors import ConfigError, UsageError, one_line
from benchd.inputs import MAX_CONFIG_BYTES, packaged_fixture, read_input
from benchd.redact import MIN_SECRET_LEN, SECRET_HEADERS, mask, register_secret, register_url

__all__ = [
    "DEFAULT_LISTEN",
    "Config",
    "ProbeConfig",
    "ServerConfig",
    "TargetConfig",
    "load_config",
    "parse_config",
    "parse_listen",
    "with_adopted_namespaces",
]

DEFAULT_LISTEN = "127.0.0.1:9108"
_T = TypeVar("_T")
_LABEL = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _label(v: str) -> str | None:
    return None if _LABEL.match(v) else "must be 1-64 chars of letters, digits, '_', '-', '.'"


def _ks(v: tuple[int, ...]) -> str | None:
    if not v or any(k <= 0 or k > 100 for k in v):
        return "must be a non-empty array of integers in 1..100"
    return None


def _positive(v: float) -> str | None:
    return None if v > 0 else "must be > 0"


def _server_seconds(v: float) -> str | None:
    return None if 0 < v <= 3600 else "must be > 0 and at most 3600 seconds"


def parse_listen(value: str, where: str = "--listen") -> tuple[str, int]:
    """Split ``HOST:PORT`` (``[::1]:9108`` for IPv6) or raise ConfigError."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{where}: expected HOST:PORT such as 127.0.0.1:9108, got {value!r}")
    return (host.strip("[]") or "127.0.0.1"), int(port)


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """``[server]``: benchd's own HTTP endpoints."""

    listen: str = DEFAULT_LISTEN
    history: int = field(default=20, metadata=check(_positive))
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    web_config: str | None = None  # exporter-toolkit style auth/TLS file (TOML)
    # benchd's HTTP server (read at start): time to receive a request, keep-alive
    # idle time, and open connections beyond which new ones get a 503.
    header_timeout_s: float = field(default=10.0, metadata=check(_server_seconds))
    idle_timeout_s: float = field(default=5.0, metadata=check(_server_seconds))
    max_connections: int = field(
        default=256, metadata=check(lambda v: None if 1 <= v <= 65536 else "must be 1..65536")
    )
    # On SIGTERM/SIGINT: how long each probe may take to stop and run its
    # cleanup = "after"; what it cannot delete in time is reported as left over.
    shutdown_grace_s: float = field(default=30.0, metadata=check(_positive))
    # The name this benchd holds its namespaces' leases under ("": the host name,
    # which a StatefulSet pod keeps across restarts). One writer per namespace.
    instance: str = ""


@dataclass(frozen=True, slots=True)
class TargetConfig:
    """A decoded ``[probe.target]``: its kind, the kind's settings and its key.

    ``settings`` is the kind's own dataclass, for its adapter (and config)
    alone; generic code reads the typed properties below, which read what
    the kind declares of its settings (:class:`~benchd.config.kinds.CommonSettings`).
    """

    kind: str
    settings: object  # opaque here: the adapter built from it (and config) read it
    secret: Secret | None = None

    @property
    def common(self) -> CommonSettings:
        """The settings every kind may share, as the kind declares them (see config.kinds)."""
        return target_kinds()[self.kind].common(self.settings)

    @property
    def cleanup(self) -> Literal["before", "after", "never"]:
        """The cleanup policy; ``never`` for a kind without one."""
        return self.common.cleanup

    @property
    def url(self) -> str | None:
        """The store's URL; None for an in-process target."""
        return self.common.url

    @property
    def namespace(self) -> str | None:
        """The store namespace (client_id) the probe owns; None when the kind has none."""
        return self.common.namespace

    @property
    def adopt_namespace(self) -> bool:
        return self.common.adopt_namespace is True


@dataclass(frozen=True, slots=True)
class _ProbeTable:
    name: str = field(metadata=check(_label))
    fixture: str
    target: dict[str, Any]
    k: tuple[int, ...] = field(default=(5, 10), metadata=check(_ks))
    interval_s: float = field(default=300.0, metadata=check(_positive))
    timeout_s: float = field(default=120.0, metadata=check(_positive))
    jitter_s: float | None = None
    baseline: str | None = None
    load: LoadProfile = field(default_factory=LoadProfile)
    drift: DriftSettings = field(default_factory=DriftSettings)
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    thresholds: ThresholdSettings = field(default_factory=ThresholdSettings)


@dataclass(frozen=True, slots=True)
class ProbeConfig:
    """One probe: a target × a fixture × a load profile × a schedule."""

    name: str
    fixture: Path
    target: TargetConfig
    k: tuple[int, ...] = (5, 10)
    interval_s: float = 300.0
    timeout_s: float = 120.0
    jitter_s: float = 0.0
    baseline: Path | None = None
    load: LoadProfile = field(default_factory=LoadProfile)
    drift: DriftSettings = field(default_factory=DriftSettings)
    budget: BudgetSettings = field(default_factory=BudgetSettings)  # its API key's
    thresholds: tuple[Threshold, ...] = ()  # [probe.thresholds]: CI gate and breach gauge
    # the fixture as written when ${VAR} made its path ("${DATA}/x.jsonl"): what errors show
    fixture_source: str = ""

    @property
    def max_k(self) -> int:
        return max(self.k)


@dataclass(frozen=True, slots=True)
class _ConfigTable:
    server: ServerConfig = field(default_factory=ServerConfig)
    probe: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Config:
    """The whole configuration; swapped atomically on reload."""

    path: str
    server: ServerConfig
    probes: tuple[ProbeConfig, ...]
    web: WebConfig | None = None  # server.web_config, decoded and checked

    def probe(self, name: str) -> ProbeConfig:
        for p in self.probes:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.probes) or "none"
        raise ConfigError(f"{self.path}: no probe named {name!r} (probes: {known})")


def load_config(path: str | Path, *, secrets: bool = True) -> Config:
    """Read, interpolate, decode and validate a config file.

    ``secrets=False`` checks everything but the presence of each API key (the
    variable set, the file readable): what ``benchd validate`` does without
    ``--check-secrets``, so a config can be checked in CI without its keys.
    A ConfigError carries every problem found (``.problems``), one line each.
    """
    file = str(path)
    try:
        raw = read_input(path, limit=MAX_CONFIG_BYTES)
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read config: {exc.strerror or exc}") from None
    except ValueError as exc:  # a directory, a FIFO, a device, too large
        raise ConfigError(f"{file}: {exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{file}: not UTF-8 text; is this a TOML config?") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: invalid TOML: {exc}") from None
    except ValueError:  # int() past Python's 4,300-digit limit, inside tomllib
        raise ConfigError(
            f"{file}: invalid TOML: an integer with thousands of digits; integers in a "
            "config are within -2^63..2^63-1"
        ) from None
    except RecursionError:
        raise ConfigError(f"{file}: invalid TOML: arrays or tables nested too deeply") from None
    return parse_config(data, file=file, base=Path(path).resolve().parent, secrets=secrets)


def parse_config(data: dict[str, Any], *, file: str, base: Path, secrets: bool = True) -> Config:
    """Decode an already-parsed TOML document (``base`` anchors relative paths).

    A ConfigError lists every problem and never quotes a value taken from the
    environment; the secrets the config names are registered with
    :mod:`benchd.redact` (see :func:`_register_secrets`).
    """
    env = _Interpolated()
    with hidden_paths(env.paths):
        try:
            config = _parse(data, file=file, base=base, secrets=secrets, env=env)
        except ConfigError as exc:
            lines = [env.sources(env.hide(line), file) for line in exc.problems]
            raise ConfigError([mask(line) for line in lines]) from None
    return _as_written(config, env)


def _as_written(config: Config, env: _Interpolated) -> Config:
    """Each key's source as the config wrote it: ``api_key_file ${KEYS}/brain``.

    A store's auth error names it; an expanded path could show a home
    directory or another variable's value.
    """
    probes = []
    for i, p in enumerate(config.probes):
        fixture_vars = env.paths.get(f"probe[{i}].fixture", ())
        if fixture_vars:
            p = dataclasses.replace(p, fixture_source=env.unexpand(str(p.fixture), fixture_vars))
        secret = p.target.secret
        names = env.paths.get(f"probe[{i}].target.api_key_file", ())
        if secret is not None and names:
            source = secret.source
            for name in sorted(set(names), key=lambda n: -len(env.values[n])):
                if env.values[name]:
                    source = source.replace(env.values[name], f"${{{name}}}")
            written = dataclasses.replace(secret, source=source)
            p = dataclasses.replace(p, target=dataclasses.replace(p.target, secret=written))
        probes.append(p)
    return dataclasses.replace(config, probes=tuple(probes))


def _parse(
    data: dict[str, Any], *, file: str, base: Path, secrets: bool, env: _Interpolated
) -> Config:
    problems: list[str] = []
    data = _interpolate(data, file, "", problems, env)
    _register_secrets(data, env)
    table = _collect(problems, lambda: decode(_ConfigTable, data, file=file, path=""))
    if table is None:  # still check every probe table that can be read
        raw_probes = data.get("probe")
        tables = raw_probes if isinstance(raw_probes, list) else []
        table = _ConfigTable(probe=tuple(p for p in tables if isinstance(p, dict)))
    server_listen = table.server.listen
    _collect(problems, lambda: parse_listen(server_listen, f"{file}: server.listen"))
    probes: list[ProbeConfig] = []
    for i, raw in enumerate(table.probe):
        try:
            probes.append(_probe(raw, file=file, path=f"probe[{i}]", base=base, secrets=secrets))
        except ConfigError as exc:
            problems.extend(exc.problems)
    if not table.probe:
        problems.append(
            f"{file}: no [[probe]] tables: benchd has nothing to run; add one "
            "(benchd init writes an annotated starter config)"
        )
    names = [p.name for p in probes]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"{file}: probe name {name!r} is used twice; probe names must be unique")
    problems.extend(_shared_namespaces(probes, file))
    if problems:
        raise ConfigError(problems)
    server, web = table.server, None
    if server.web_config:
        web_path = str(_resolve(server.web_config, base))
        server = dataclasses.replace(server, web_config=web_path)
        web = _collect(problems, lambda: read_web_config(web_path, load_tls=True))
        if problems:
            raise ConfigError(problems)
    return Config(path=file, server=server, probes=tuple(probes), web=web)


def _collect(problems: list[str], step: Callable[[], _T]) -> _T | None:
    """``step()``, or None with its ConfigError's problems appended to ``problems``."""
    try:
        return step()
    except ConfigError as exc:
        problems.extend(exc.problems)
        return None


def _shared_namespaces(probes: Sequence[ProbeConfig], file: str) -> list[str]:
    """Two probes writing one namespace of one store would replace each other's corpus."""
    seen: dict[tuple[str, str], str] = {}
    problems: list[str] = []
    for p in probes:
        namespace, url = p.target.namespace, p.target.url
        if namespace is None or url is None:
            continue
        key = (str(url).rstrip("/"), str(namespace))
        if key in seen:
            problems.append(
                f"{file}: probes {seen[key]!r} and {p.name!r} both use namespace "
                f"{namespace!r} at {key[0]}; give each probe its own namespace"
            )
        else:
            seen[key] = p.name
    return problems


def with_adopted_namespaces(config: Config, namespaces: Sequence[str]) -> Config:
    """``config`` with ``adopt_namespace = true`` on the probes whose namespace is named.

    What ``--adopt-namespace NAME`` means for ``benchd once`` and ``benchd run``:
    seed into (and mark as benchd's) that namespace although it holds foreign
    records. Each name must be some probe's namespace (a UsageError otherwise),
    and the daemon applies it to the probes it starts with, never to probes a
    reload adds.
    """
    wanted = set(namespaces)
    known = {p.target.namespace for p in config.probes}
    for name in sorted(wanted - known):
        raise UsageError(
            f"--adopt-namespace {name}: no probe in {config.path} uses that namespace "
            f"(namespaces: {', '.join(sorted(str(k) for k in known if k)) or 'none'})"
        )
    probes = tuple(
        dataclasses.replace(
            p,
            target=dataclasses.replace(
                p.target, settings=_adopting(p.target.settings)
            ),
        )
        if p.target.common.adopt_namespace is not None and p.target.namespace in wanted
        else p
        for p in config.probes
    )
    return dataclasses.replace(config, probes=probes)


def _adopting(settings: Any) -> object:
    """A kind's settings with ``adopt_namespace = true`` (a dataclass of the kind's own)."""
    return dataclasses.replace(settings, adopt_namespace=True)


def _probe(raw: Any, *, file: str, path: str, base: Path, secrets: bool) -> ProbeConfig:
    problems: list[str] = []
    table = _collect(problems, lambda: decode(_ProbeTable, raw, file=file, path=path))
    raw_target = raw.get("target") if isinstance(raw, dict) else None
    target = None
    if isinstance(raw_target, dict):  # checked even when another key of the probe is bad
        target = _collect(
            problems,
            lambda: _target(
                raw_target,
                file=file,
                path=f"{path}.target",
                secrets=secrets,
                probe=str(raw.get("name", "")),
            ),
        )
    if table is None or target is None:
        raise ConfigError(problems)
    jitter = table.interval_s * 0.1 if table.jitter_s is None else table.jitter_s
    if not 0 <= jitter < table.interval_s:
        problems.append(f"{file}: {path}.jitter_s: must be >= 0 and below interval_s")
    thresholds = _collect(
        problems,
        lambda: _thresholds(
            table, file=file, path=f"{path}.thresholds", unranked=target.common.unranked
        ),
    )
    if problems or thresholds is None:
        raise ConfigError(problems)
    return ProbeConfig(
        name=table.name,
        fixture=_resolve(table.fixture, base),
        target=target,
        k=tuple(sorted(set(table.k))),
        interval_s=table.interval_s,
        timeout_s=table.timeout_s,
        jitter_s=jitter,
        baseline=_resolve(table.baseline, base) if table.baseline else None,
        load=table.load,
        drift=table.drift,
        budget=table.budget,
        thresholds=thresholds,
    )


def _thresholds(
    table: _ProbeTable, *, file: str, path: str, unranked: bool
) -> tuple[Threshold, ...]:
    """``[probe.thresholds]`` checked against the probe's own k, load mode and answers."""
    out = table.thresholds.thresholds()
    ks = sorted(set(table.k))
    mode = table.load.mode
    problems = []
    for t in out:
        problem = threshold_problem(t) or check_threshold(
            t, ks=ks, load_mode=mode, unranked=unranked
        )
        if problem:
            problems.append(f"{file}: {join_key(f'{path}.{t.pass_}', t.measure)}: {problem}")
    if problems:
        raise ConfigError(problems)
    return out


def _target(
    raw: dict[str, Any], *, file: str, path: str, secrets: bool = True, probe: str = ""
) -> TargetConfig:
    registered = target_kinds()
    kinds = ", ".join(sorted(registered))
    kind_name = raw.get("kind")
    if not isinstance(kind_name, str):
        raise ConfigError(f"{file}: {path}.kind: required; one of {kinds}")
    kind = registered.get(kind_name)
    if kind is None:
        raise ConfigError(f"{file}: {path}.kind: unknown kind {kind_name!r}; one of {kinds}")
    rest = {k: v for k, v in raw.items() if k != "kind"}
    namespace = kind.namespace_default(probe) if "namespace" not in rest and probe else None
    if namespace is not None:
        rest["namespace"] = namespace
    settings = decode(kind.settings_type, rest, file=file, path=path)
    common = kind.common(settings)
    env, key_file = common.api_key_env, common.api_key_file
    if not secrets:  # validate without --check-secrets: how the key is named, not its value
        if env and key_file:
            raise ConfigError(f"{file}: {path}: set api_key_env or api_key_file, not both")
        return TargetConfig(kind=kind_name, settings=settings, secret=None)
    secret = read_secret(
        env=env, file=key_file, where=f"{file}: {path}", kind=common.secret_kind
    )
    return TargetConfig(kind=kind_name, settings=settings, secret=secret)


def _resolve(value: str, base: Path) -> Path:
    if value.startswith("packaged:"):
        return packaged_fixture(value.removeprefix("packaged:"))
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


@dataclass(slots=True)
class _Interpolated:
    """What ``${VAR}`` expansion substituted: the key paths it touched and the values."""

    paths: dict[str, list[str]] = field(default_factory=dict)  # key path -> variable names
    values: dict[str, str] = field(default_factory=dict)  # variable name -> value

    def unexpand(self, text: str, names: Iterable[str]) -> str:
        """``text`` with these variables' values written back as ``${VAR}``."""
        for name in sorted(set(names), key=lambda n: -len(self.values[n])):
            if self.values[name]:
                text = text.replace(self.values[name], f"${{{name}}}")
        return text

    def sources(self, line: str, file: str) -> str:
        """``line`` with the variables its key path's value came from named at the end."""
        names = [
            name
            for path, found in self.paths.items()
            for name in found
            if line.startswith(f"{file}: {path}:") or _names_key(line, file, path)
        ]
        if not names:
            return line
        shown = ", ".join(f"${{{n}}}" for n in dict.fromkeys(names))
        return f"{line} (the value comes from {shown})"

    def hide(self, line: str) -> str:
        """``line`` with every substituted value (past the file and key path) as ``${VAR}``."""
        parts = line.split(": ", 2)
        head, text = ": ".join(parts[:-1]), parts[-1]
        for name, value in sorted(self.values.items(), key=lambda kv: -len(kv[1])):
            for form in dict.fromkeys((value, one_line(value))):  # as ConfigError escapes it
                if len(form) >= MIN_SECRET_LEN and form in text:
                    text = text.replace(form, f"${{{name}}}")
        return f"{head}: {text}" if head else text


def _names_key(line: str, file: str, path: str) -> bool:
    """Whether ``line`` is about the table entry ``path`` (a header named in its table's line)."""
    table, _, key = path.rpartition(".")
    named = f" {json.dumps(key.strip(chr(34)))}" in line
    return bool(table) and named and line.startswith(f"{file}: {table}:")


def _interpolate(value: Any, file: str, path: str, problems: list[str], env: _Interpolated) -> Any:
    """``value`` with ``${VAR}`` expanded; each unusable string is a line in ``problems``."""
    if isinstance(value, str):
        if "\x00" in value:  # no path, URL or name may hold one; open() would raise ValueError
            problems.append(f"{file}: {path}: contains a NUL character (\\u0000); remove it")
            return value
        if "$" not in value:
            return value
        expanded = _collect(problems, lambda: _VAR.sub(lambda m: _env(m, file, path, env), value))
        return value if expanded is None else expanded
    if isinstance(value, dict):
        return {
            k: _interpolate(v, file, join_key(path, k), problems, env) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_interpolate(v, file, f"{path}[{i}]", problems, env) for i, v in enumerate(value)]
    return value


def _env(match: re.Match[str], file: str, path: str, env: _Interpolated) -> str:
    name = match.group(1)
    if name is None:
        return "$"
    if name not in os.environ:
        raise ConfigError(
            f"{file}: {path}: ${{{name}}} is not set in the environment; export it or "
            "write $${...} for a literal"
        )
    env.paths.setdefault(path, []).append(name)
    env.values[name] = os.environ[name]
    return os.environ[name]


def _register_secrets(value: Any, env: _Interpolated, path: str = "") -> None:
    """Register what the config says is secret with :mod:`benchd.redact`.

    The password of any URL's user info and its credential query parameters;
    every value of a ``headers`` table that came from ``${VAR}`` or sits under
    a credential header name (:data:`~benchd.redact.SECRET_HEADERS`), with the
    variables' own values.
    """
    if isinstance(value, str):
        if "://" in value and ("@" in value or "?" in value):
            register_url(value)
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _register_secrets(item, env, f"{path}[{i}]")
        return
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        where = join_key(path, key)
        if key == "headers" and isinstance(item, dict):
            _register_headers(item, env, where)
        _register_secrets(item, env, where)


def _register_headers(headers: dict[str, Any], env: _Interpolated, path: str) -> None:
    for name, header in headers.items():
        if not isinstance(header, str):
            continue
        where = join_key(path, name)
        if name.lower() in SECRET_HEADERS or where in env.paths:
            register_secret(header)
            _, _, credential = header.partition(" ")  # "Bearer <token>": the token alone too
            if credential:
                register_secret(credential)
        for var in env.paths.get(where, ()):
            register_secret(env.values[var])
