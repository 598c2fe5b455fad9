"""Configuration: strict TOML decoding into frozen, typed settings.

``load`` reads and validates a config file, ``schema`` is the one generic
typed decoder, ``secrets`` reads API keys from the environment or a file.
Import from the submodules (``from benchd.config.load import Config``).
"""
