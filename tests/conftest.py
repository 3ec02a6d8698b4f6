"""The tests are laid out like the source (``tests/core/...`` for ``suanli/core/...``) and
imported by path (``--import-mode=importlib``), so that two test modules may share a name;
the shared builders beside this file are importable from any of them."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
