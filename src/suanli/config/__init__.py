"""Configuration at the edges: parsing user input (command line, YAML) into core domain values.

pydantic lives here and nowhere below: ``suanli.core`` only ever sees frozen dataclasses.
"""

from suanli.config.cluster import load_cluster, parse_short_form, parse_yaml

__all__ = ["load_cluster", "parse_short_form", "parse_yaml"]
