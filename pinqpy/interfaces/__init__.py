"""The interfaces: the notebook magic, the interactive shell and the command line."""
