"""python -m benchmarks: the benchmark (benchmarks/run.py)."""
import sys

from .run import main

sys.exit(main())
