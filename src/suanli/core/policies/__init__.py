"""Built-in queue orders, placements and runtime estimators: one policy per module, each
registering itself as ``seam/name`` when imported (``suanli.core.registry.BUILTIN`` lists
them)."""
