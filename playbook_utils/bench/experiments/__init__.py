"""One-off experiments, each a script that wrote a JSON file now kept under results/<machine>/ (whose README
says what each found). Run one as a module, e.g. `python -m playbook_utils.bench.experiments.pyav_frame_threads
OUT.json`; importing one runs nothing, and the package imports none of them."""
