"""The measurements: benchmarks, ceilings, correctness and fault matrices, and the test media and local object store
they run on. They import the library, never the reverse.

harness (notebook 20), timing, verdicts, exactness, matrix (10-15, 23), faults (23),
nvdec (00, 20), sparse (01, 20), bandwidth (00, 30), loader_bench (21), choose (22), access_cost (24), scaling (30),
media (the stamped test media, 01), objectstore (a local S3 server, 24)."""
