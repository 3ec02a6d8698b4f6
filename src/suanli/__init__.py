"""suanli (算力): compute scheduling and operations for AI data centres."""

__version__ = "0.1.0"
