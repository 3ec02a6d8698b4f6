"""Online inference services: the queueing model of a replicated service (``queueing``), what
a service is (``service``), and the ``autoscaler`` seam that sizes it from its demand."""
