"""The package version, in one place: the package face, the CLI and the framework import it here."""

__version__ = "0.1.0"
