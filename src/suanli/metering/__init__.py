"""Metering: usage records from job attempts, price books, the ledger, budgets and reports.

Layering: ``metering`` sits beside ``sim`` above ``core``; it reads attempts (from a simulation
output directory, whose format ``suanli.sim.attempts.ATTEMPT_COLUMNS`` defines, or later the
live store) and never imports ``cli``.
"""
