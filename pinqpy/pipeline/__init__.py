"""The query pipeline: prepare, check, charge, cache, read and release."""
