"""``ddlsim calibrate``: per-layer compute calibrations from a real TensorFlow profiling pass.

TensorFlow is an optional extra (``calibrate``) and is imported only on
the calibration path, never by ``ddlsim predict``. The pieces:

* :mod:`~ddlsim.tools.calibrate.keras_builder`, :mod:`~ddlsim.tools.calibrate.keras_layers`,
  :mod:`~ddlsim.tools.calibrate.keras_models`: Keras models built by running the zoo's own model
  definitions with a Keras-aware builder; their variables are the zoo's gradient tensors, name
  for name, and each zoo layer's ops run under that layer's name scope;
* :mod:`~ddlsim.tools.calibrate.run`: one profiling pass (warm-up, timed and traced training steps,
  serialised op execution) -> a :class:`~ddlsim.calibration.profile.ModelProfile`;
* :mod:`~ddlsim.tools.calibrate.profiler`: the ``*.xplane.pb`` trace, read and attributed to layers;
* :mod:`~ddlsim.calibration.transfer`, :mod:`~ddlsim.tools.calibrate.logs`: anchoring to a measured
  throughput (given, or read from a benchmark log) and roofline transfer to another GPU;
* :mod:`~ddlsim.tools.calibrate.devices`, :mod:`~ddlsim.tools.calibrate.tf_env`: which device, which
  catalog id; :mod:`~ddlsim.tools.calibrate.driver`, :mod:`~ddlsim.tools.calibrate.progress`: the
  command.

Files go where ``ddlsim predict`` looks first (:func:`ddlsim.calibration.store.user_dir`), in the
shipped calibration format (:mod:`ddlsim.calibration.profile`, schema 1, written atomically), with
``provenance.method = "tf-profiler"``.
"""
