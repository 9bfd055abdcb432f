"""The package version (``pinqpy.__version__``), here so that the command line can show it
without importing the package root."""

__version__ = "0.1.0"
