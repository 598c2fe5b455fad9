"""``python -m benchd.targets._decode_main``: the decode worker (see :mod:`benchd.targets.decoder`).

A module of its own so that ``-m`` never runs a module the package has already imported.
"""

from benchd.targets.decoder import main

main()
