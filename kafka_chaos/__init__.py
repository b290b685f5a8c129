"""kafka-chaos: the command line above the harness (which runs experiments) and the analysis."""

# The one place the version is written; pyproject.toml reads it from here.
__version__ = "0.1.0"
