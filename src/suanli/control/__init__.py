"""The live control plane behind ``suanli serve``: its API, state and metrics."""
