"""The tools built on the model: profiling calibrations (calibrate), checking predictions
against measurements (validate), fitting networks (netcal), importing traces (traces), sweeps,
timelines and plots (analysis), and local Horovod runs (hvdlocal)."""
