"""`python -m bench`: run every benchmark and rewrite bench/RESULTS.md."""

from bench.run import main

raise SystemExit(main())
