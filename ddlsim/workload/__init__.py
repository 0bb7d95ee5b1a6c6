"""Workloads: the model zoo, compute calibrations (format, roofline, anchoring, lookup)."""
