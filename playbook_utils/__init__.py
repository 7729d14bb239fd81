"""Shared helpers for the Accelerated Video Loading Playbook: the library (decoders, loaders, sampling, ...),
the measurements (`bench`) and the tools (`tools`), imports pointing that way.

Importing this package imports no decoder library, torch or matplotlib.
"""

from playbook_utils.errors import BackendUnavailable, DecodeError

__all__ = ["BackendUnavailable", "DecodeError"]
__version__ = "0.1.0"
