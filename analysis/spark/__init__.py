"""The Spark stage: reconcile many runs in one job, locally or on a standalone cluster."""
