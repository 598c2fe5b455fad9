"""The reference store: a small Zengram-compatible memory API."""
