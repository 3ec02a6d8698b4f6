"""The built-in ``autoscaler/...`` plugins (``suanli.core.serving.autoscaler``)."""
