"""The ``suanli`` command line (Typer). The entry point is ``suanli.cli.main:main``.

Modules: ``main`` (the app), ``errors`` (one-line errors, exit code 2), one module per
command (``policies``, ``simulate``) and ``table`` (the side-by-side results table).
"""
