"""`python -m visformer ...` (and `torchrun -m visformer ...`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
