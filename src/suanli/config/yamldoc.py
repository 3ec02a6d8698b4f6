"""Reading a YAML configuration file's top-level mapping, with one-line errors."""

from __future__ import annotations

from typing import Any

import yaml

from suanli.core.model import SpecError


def yaml_mapping(text: str, where: str, expects: str) -> dict[Any, Any]:
    """The top-level mapping of YAML ``text``; ``SpecError`` naming ``where`` (and the line and
    column of a syntax error) otherwise. ``expects`` says what the mapping should hold."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        pos = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise SpecError(f"{where}: invalid YAML{pos}: {problem}") from None
    if data is None:
        raise SpecError(f"{where}: empty file (expected {expects})")
    if not isinstance(data, dict):
        raise SpecError(f"{where}: expected a mapping with {expects} at the top level")
    return data
