"""Engines: what an executor provides, the registry, and one folder per backend."""
