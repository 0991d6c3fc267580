"""``python -m impulse.loadtest``: the same as the ``impulse-load`` command."""

import sys

from impulse.loadtest.cli import main

if __name__ == "__main__":
    sys.exit(main())
