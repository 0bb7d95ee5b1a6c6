"""Calibrations: compute calibration files (format, store and precedence, which one a job uses,
anchoring and transfer between GPUs) and network calibration files."""
