"""`python -m playbook_utils.bench --serve`: a child serving one backend's measurements (`harness.run_all`)."""

import sys

from playbook_utils.bench.harness import main

sys.exit(main())
