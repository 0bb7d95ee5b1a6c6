"""Analyses built on predictions: timelines, time to train, parameter sweeps and their plots."""
