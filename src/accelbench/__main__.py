"""``python -m accelbench`` is the ``accelbench`` command."""

import sys

from .cli import main

sys.exit(main())
