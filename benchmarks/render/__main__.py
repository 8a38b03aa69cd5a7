"""``python -m benchmarks.render``: see :mod:`benchmarks.render`."""

import sys

from benchmarks.render import main

sys.exit(main())
