"""The tools: the notebook runner (`run_notebooks`), nightly validation (`nightly`), environment setup
(`setup_env`), the notebooks' kit (`kit`, `results`, `plots`) and checks (`notebook_stats`, `reference_audit`).

Importing this package imports nothing; `setup_env` uses the standard library only.
"""
