"""A job resolved into something to simulate: :func:`~ddlsim.resolve.prepare.prepare` turns a
:class:`~ddlsim.config.JobConfig` into a :class:`~ddlsim.resolve.prepare.Setup` (the workload
with its calibration, the cluster, the strategy, the communication model and the DAG)."""

from ddlsim.resolve.prepare import Setup, prepare

__all__ = ["Setup", "prepare"]
