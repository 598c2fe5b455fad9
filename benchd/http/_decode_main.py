"""``python -m benchd.http._decode_main``: the decode worker (see :mod:`benchd.http.decoder`).

A module of its own so that ``-m`` never runs a module the package has already imported.
"""

from benchd.http.decoder import main

main()
