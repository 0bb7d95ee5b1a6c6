"""Measured traces: benchmark logs into the measured-runs schema, Horovod timelines.

- :mod:`~ddlsim.tools.traces.logs`: parse the output of Horovod's synthetic benchmarks and of
  tf_cnn_benchmarks (:func:`~ddlsim.tools.traces.logs.parse_log`);
- :mod:`~ddlsim.tools.traces.importer`: turn parsed logs and command-line facts into CSV rows;
- :mod:`~ddlsim.tools.traces.timeline`: load a Horovod timeline (Chrome trace JSON);
- :mod:`~ddlsim.tools.traces.phases`: per-iteration negotiation, fusion-copy and allreduce times of
a
  timeline or of a ddlsim simulation; :mod:`~ddlsim.tools.traces.report`: their text table.
"""
