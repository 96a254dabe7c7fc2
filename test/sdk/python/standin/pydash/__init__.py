"""Test-only stand-in for pydash, which Debian does not package and
azure-ai-ml 1.4.0 imports. It implements only the three functions that
azure-ai-ml calls (get, omit, objects.set_), with pydash's semantics for
the dotted paths azure-ai-ml passes. Not for use outside Cumulus's tests."""

from . import objects
from .objects import get, omit, set_

__all__ = ["get", "omit", "set_", "objects"]
