"""Shared helpers for the Accelerated Video Loading Playbook.

Importing this package does nothing but define names: no decoder library, no torch,
no matplotlib is imported until a function that needs it is called.
"""

from playbook_utils.errors import BackendUnavailable, DecodeError

__all__ = ["BackendUnavailable", "DecodeError"]
__version__ = "0.1.0"
