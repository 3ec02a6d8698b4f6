"""Built-in routers, one per module, each registering itself as ``router/<name>``
(``suanli.core.routing``)."""
