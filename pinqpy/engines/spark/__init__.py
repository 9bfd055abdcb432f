"""The Spark engine."""
