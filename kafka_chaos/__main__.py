"""`python -m kafka_chaos` runs the command line, like the `kafka-chaos` script."""

import sys

from kafka_chaos.cli import main

sys.exit(main())
