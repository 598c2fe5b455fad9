"""``python -m benchd`` runs the command line."""

from benchd.cli import main

raise SystemExit(main())
