"""``python -m benchd`` runs the command line."""

from benchd.cli import main

# Guarded: the decode worker process loads the parent's main module (as
# ``__mp_main__``, the way multiprocessing does) and must not run the CLI.
if __name__ == "__main__":
    raise SystemExit(main())
