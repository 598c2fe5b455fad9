"""Configuration: strict TOML decoding into frozen, typed settings.

``load`` reads and validates a config file, ``schema`` is the one generic
typed decoder, ``secrets`` reads API keys from the environment or a file.
The public names are re-exported here.
"""

from benchd.config.load import (
    DEFAULT_LISTEN,
    Config,
    ProbeConfig,
    ServerConfig,
    TargetConfig,
    load_config,
    parse_config,
    parse_listen,
    with_adopted_namespaces,
)

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
