"""The measurements: benchmarks, ceilings, correctness and fault matrices, and the experiments behind them.

They measure the library (`playbook_utils.decoders`, `loaders`, `sources`, ...) and import it; the library
never imports them. Importing this package imports nothing.

    harness       decode benchmarks: backend x workload x clip, each job in a fresh process (notebook 20);
                  `python -m playbook_utils.bench` runs it
    monitor       CPU, RSS, NVDEC and SM utilization sampled while something runs
    timing        warm up, repeat, median and spread (notebooks 10-14)
    verdicts      "fastest" with its margin against the spread (notebooks 12, 20-22)
    exactness     did a backend return the frames asked for: stamps, or a reference decode (20-22)
    matrix        the correctness matrix: tricky files x backends (notebooks 10-15, 23)
    faults        broken files, soaks, replaced files (notebook 23)
    nvdec         which codecs NVDEC decodes, and its ceiling (notebooks 00, 20)
    sparse        K frames out of a video, five ways (notebooks 01, 20)
    bandwidth     storage and page-cache read rates (notebooks 00, 30)
    loader_bench  whole training loaders against a training step and the NVDEC ceiling (notebook 21)
    choose        the loader for the reader's files, from what was measured (notebook 22)
    access        what one sampled clip costs to read from object storage (notebook 24)
    scaling       sharded loading over ranks under torchrun (notebook 30)
    experiments/  one-off scripts whose JSON lies in results/<machine>/
"""
