"""The control plane's HTTP API (FastAPI): ``suanli.api.app.create_app``.

Modules: ``app`` (the endpoints), ``schemas`` (the JSON), ``errors`` (one error shape),
``middleware`` (request counting, the body limit) and ``logs`` (reading log files).
The command-line client (``suanli.cli.client``) talks to it over HTTP and imports none of it.
"""
