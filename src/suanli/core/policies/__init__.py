"""Built-in policies. Each module registers one policy as ``seam/name``."""

from suanli.core.policies import (  # noqa: F401
    best_fit,
    dot_product,
    fair_share,
    fgd,
    fgd_baselines,
    fifo,
    first_fit,
    frag_balance,
    packing,
    priority,
    random_fit,
    sjf,
    smallest_first,
    worst_fit,
)
