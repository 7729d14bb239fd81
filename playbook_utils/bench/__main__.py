"""`python -m playbook_utils.bench`: the decode benchmarks of `harness` (see `--help`)."""

import sys

from playbook_utils.bench.harness import main

sys.exit(main())
