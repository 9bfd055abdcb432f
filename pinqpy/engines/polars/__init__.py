"""The Polars engine: plans run as Polars lazy queries (:mod:`.executor`)."""
