"""The pandas engine."""
