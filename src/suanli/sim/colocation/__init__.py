"""The co-location simulator: one online service and elastic training sharing a GPU pool,
stepped in fixed intervals, with the levers of ``Levers`` (``model``), run by ``engine``
and summed up by ``outcome``."""
