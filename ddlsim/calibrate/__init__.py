"""``ddlsim calibrate``: per-layer compute calibrations from a real TensorFlow profiling pass.

TensorFlow is an optional extra (``calibrate``) and is imported only on
the calibration path, never by ``ddlsim predict``. The pieces:

* :mod:`~ddlsim.calibrate.keras_builder`, :mod:`~ddlsim.calibrate.keras_layers`,
  :mod:`~ddlsim.calibrate.keras_models`: Keras models built by running the zoo's own model
  definitions with a Keras-aware builder; their variables are the zoo's gradient tensors, name
  for name, and each zoo layer's ops run under that layer's name scope;
* :mod:`~ddlsim.calibrate.run`: one profiling pass (warm-up, timed and traced training steps,
  serialised op execution) -> a :class:`~ddlsim.workload.profile.ModelProfile`;
* :mod:`~ddlsim.calibrate.profiler`: the ``*.xplane.pb`` trace, read and attributed to layers;
* :mod:`~ddlsim.workload.transfer`, :mod:`~ddlsim.calibrate.logs`: anchoring to a measured
  throughput (given, or read from a benchmark log) and roofline transfer to another GPU;
* :mod:`~ddlsim.calibrate.devices`, :mod:`~ddlsim.calibrate.tf_env`: which device, which
  catalog id; :mod:`~ddlsim.calibrate.driver`, :mod:`~ddlsim.calibrate.progress`: the command.

Files go where ``ddlsim predict`` looks first (:func:`ddlsim.workload.store.user_dir`), in the
shipped calibration format (:mod:`ddlsim.workload.profile`, schema 1, written atomically), with
``provenance.method = "tf-profiler"``.
"""
