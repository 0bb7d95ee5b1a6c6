"""Defaults of ``ddlsim calibrate`` (a light module: the CLI reads them for its help text
without importing the calibration machinery on ``ddlsim predict``'s path)."""

DEFAULT_GPU_BATCHES = (32, 64, 128)  # the batches of the shipped calibrations
DEFAULT_CPU_BATCHES = (16,)
DEFAULT_STEPS = 5  # traced steps per pass (as many untraced ones are timed)
DEFAULT_WARMUP_STEPS = 2
