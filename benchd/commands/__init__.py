"""Subcommands: one module each, registered in benchd.cli.COMMANDS."""
