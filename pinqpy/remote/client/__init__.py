"""The analyst's client: ``pq.connect(url, token=...)`` and the remote frames it hands out."""
