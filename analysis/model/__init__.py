"""The analysis model: the anomaly registry and the typed results every stage passes on."""
