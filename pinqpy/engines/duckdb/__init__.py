"""The DuckDB engine."""
