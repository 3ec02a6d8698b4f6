"""The compute network: many clusters in many regions as one market (``docs/network.md``).

``suanli.federation`` builds a federation of member clusters, each with its own scheduler
built by the core builder, routes every job to one of them through a ``router/<name>``
plugin (``suanli.core.routing``), moves its data when it runs away from it, prices every
use in the member's price book and settles every cross-region use in the ledger.
"""
