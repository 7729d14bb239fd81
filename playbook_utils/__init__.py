"""Shared helpers for the Accelerated Video Loading Playbook, in three rooms whose imports point one way:

    playbook_utils/          the library a user imports: errors, media, env, device, child, decoders/
                             (read_frames and one adapter per decoder library), loaders, distributed,
                             sampling, transforms, sources, shards, objectstore, resize, access
    playbook_utils/bench/    the measurements (benchmarks, ceilings, correctness and fault matrices); they
                             import the library
    playbook_utils/tools/    the notebook runner, nightly validation, setup, and the notebooks' kit; they
                             import both

Importing this package does nothing but define names: no decoder library, no torch,
no matplotlib is imported until a function that needs it is called.
"""

from playbook_utils.errors import BackendUnavailable, DecodeError

__all__ = ["BackendUnavailable", "DecodeError"]
__version__ = "0.1.0"
