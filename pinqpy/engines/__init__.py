"""Engines: what an executor provides, the registry (which executor runs a plan), the
wrapping of user data into plan sources, and one folder per backend."""
