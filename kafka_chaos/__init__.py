"""kafka-chaos: the command line above the harness (which runs experiments) and the analysis."""
