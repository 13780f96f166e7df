"""The release's version: a leaf the package's own modules import (never the package root)."""

__version__ = "0.3.0"
