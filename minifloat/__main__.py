"""python -m minifloat: the command line (see minifloat.cli)."""
import sys

from .cli import main

sys.exit(main())
