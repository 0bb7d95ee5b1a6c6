"""The knob table's rows, one module per group of the job (:mod:`ddlsim.config.knobs`)."""
