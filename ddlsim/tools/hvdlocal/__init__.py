"""A real, measured Horovod run on this machine's CPU, and ddlsim's prediction of it.

``python -m ddlsim.tools.hvdlocal`` (or ``bash scripts/horovod_local.sh``, which first installs
the ``horovod`` extra) runs, on the local host:

1. probes of the two resources the communication model needs: TCP loopback throughput and
   latency between two processes, and one core's memory bandwidth (:mod:`~.probes`);
2. ``ddlsim calibrate --device cpu`` of a zoo model on one core (:mod:`~.stages`);
3. a Horovod ``hvd.allreduce`` size sweep over Gloo with 2 workers, from which the loopback
   link's per-hop efficiency and latency are fitted (:mod:`~.sweep`, :mod:`~.fit`);
4. Horovod data-parallel training of the same zoo model (the Keras model ``ddlsim calibrate``
   profiles) with 1 and 2 workers over Gloo, with Horovod timelines (:mod:`~.train`);
5. ddlsim's prediction of both runs from the calibration, and the predicted-vs-measured table
   (:mod:`~.report`), written with the raw logs under ``traces/horovod/``.

Per-worker compute resources are the same everywhere: one core. The calibration runs pinned to
one core; each Horovod worker is pinned to its own core (``local_rank``); TensorFlow runs with
one intra-op and one inter-op thread in both. Horovod's background thread and Gloo's I/O thread
share the worker's core, as they would share a GPU worker's host core.
"""

#: the catalog device of one core of this project's development machine (devices.json)
CPU_DEVICE_ID = "epyc-zen4-core"
#: ``source_id`` of the measured rows in ``traces/horovod/runs.csv``
SOURCE_ID = "HVD_LOCAL_CPU"
#: the ddlsim comm method that models Horovod over Gloo
COMM = "horovod-gloo"
#: the intra-node link of Gloo ranks on one host
INTRA_NODE = "loopback"
DEFAULT_MODEL = "alexnet"
DEFAULT_BATCH = 16
DEFAULT_WORKERS = (1, 2)
