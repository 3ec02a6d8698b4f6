"""Admission checks: one plugin per module, each registered as ``admission/<name>``
(``suanli.core.seams.Admission``)."""
