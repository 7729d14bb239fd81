"""The tools: the notebook runner, nightly validation, environment setup, and the kit the notebooks use.

They use the library and the measurements (`playbook_utils.bench`); neither imports them. Importing this
package imports nothing, and `setup_env` uses the standard library only, so that
`python -m playbook_utils.tools.setup_env` runs before anything is installed.

    run_notebooks   every notebook headlessly through papermill: `python -m playbook_utils.tools.run_notebooks`
    nightly         run the notebooks, compare their headlines with the committed baseline
    setup_env       install what this environment lacks, within the baseline's constraints
    notebook_stats  how long each notebook's cells and prose are
    reference_audit whether a folder of executed notebooks (results/h200) is a reference of today's code
    kit             what a notebook needs besides its lesson (`kit.Notebook`)
    results         what a notebook hands back (`NotebookResults`)
    plots           the figures the notebooks share
"""
