"""Failures, checkpoints and restarts: goodput and time-to-train of a job that fails.

A synchronous data-parallel job stops whenever any of its nodes fails, so its failure rate
grows with its node count. This package puts a failure model on top of a prediction's
failure-free time-to-train; :func:`ddlsim.predict` applies it to every prediction
(``Prediction.resilience``) with the job's failure fields
(:meth:`ddlsim.config.groups.JobConfig.resilience`). It imports nothing of the job, the API or the
command line:

* :mod:`~ddlsim.resilience.config`: the inputs (node MTBF, checkpoint bandwidth or time,
  interval, restart, recovery) and their documented defaults;
* :mod:`~ddlsim.resilience.state`: the checkpoint's size from the model's parameters, the
  precision and the optimizer;
* :mod:`~ddlsim.resilience.daly`: checkpoint/restart in closed form (Young 1974, Daly 2006);
* :mod:`~ddlsim.resilience.elastic`: Horovod Elastic's recovery in closed form;
* :mod:`~ddlsim.resilience.montecarlo`: whole runs drawn in lockstep (numpy, seeded), and
  :mod:`~ddlsim.resilience.trace`: one run event by event with a clock per node, drawn as a
  Chrome trace by :mod:`~ddlsim.resilience.timeline` (``ddlsim timeline --failure``);
* :mod:`~ddlsim.resilience.analysis`: :func:`analyse` a job, or :func:`from_prediction`.
"""

from ddlsim.resilience.analysis import (
    ResilienceResult,
    analyse,
    from_prediction,
    job_from_prediction,
)
from ddlsim.resilience.config import ResilienceConfig
from ddlsim.resilience.job import Job

__all__ = [
    "Job",
    "ResilienceConfig",
    "ResilienceResult",
    "analyse",
    "from_prediction",
    "job_from_prediction",
]
