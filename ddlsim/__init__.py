"""ddlsim — discrete-event simulator of distributed synchronous-SGD training.

Three inputs, one pipeline: a workload (model + per-layer compute calibration), a cluster (GPUs,
links, network) and a strategy (Horovod/NCCL/MPI/parameter servers and their knobs).
:func:`ddlsim.predict` joins them; everything else sees one input. Units are SI throughout
(seconds, bytes, bytes/second).
"""

__version__ = "0.1.0"
