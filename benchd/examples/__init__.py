"""Worked examples that ship with benchd (importable, used by configs/ and the docs)."""
