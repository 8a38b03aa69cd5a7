"""``python -m complexformer.cli`` (and ``torchrun -m complexformer.cli``) runs the command
line."""

import sys

from . import main

sys.exit(main())
