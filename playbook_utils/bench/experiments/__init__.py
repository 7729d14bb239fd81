"""One-off experiments, each a script that wrote a JSON file now kept under results/<machine>/ (whose README
says what each found). Run one as a module, e.g. `python -m playbook_utils.bench.experiments.pyav_frame_threads
OUT.json`; none is imported by the package."""
