"""Validation of ddlsim against measured runs (``ddlsim validate``).

- :mod:`~ddlsim.tools.validate.runs`: the measured-runs CSV schema (``traces/measured/README.md``):
  lenient reading (bad rows become coded, line-numbered defects) and strict reading, writing
  atomically;
- :mod:`~ddlsim.tools.validate.transformer_runs`: the transformer runs' schema
  (``traces/measured/README_transformers.md``), read by the same reader, and
  :mod:`~ddlsim.tools.validate.transformer_mapping`: its row -> predict mapping;
- :mod:`~ddlsim.tools.validate.options`: the settings applied to every row, checked up front;
- :mod:`~ddlsim.tools.validate.baseline`: which single-GPU row anchors a multi-GPU row;
- :mod:`~ddlsim.tools.validate.mapping`: a row and its baseline -> ``ddlsim.predict`` keyword
  arguments, or the reason the row cannot be predicted;
- :mod:`~ddlsim.tools.validate.core`: predict every row, never stopping at one that fails;
  rows under a catalog assumption are marked so that statistics keep them apart;
- :mod:`~ddlsim.tools.validate.stats` and :mod:`~ddlsim.tools.validate.report`: error statistics,
tables;
- :mod:`~ddlsim.tools.validate.plot`: predicted-vs-measured and scaling-curve figure (matplotlib);
- :mod:`~ddlsim.config.track_record`: the error by method and node count that predict quotes.
"""
