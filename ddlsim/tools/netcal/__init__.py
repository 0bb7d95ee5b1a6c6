"""Communication calibrated from measured collectives: ``ddlsim calibrate network``.

:mod:`~ddlsim.tools.netcal.logs` reads collective benchmark output (nccl-tests, OSU, the host sweeps
this repository records), :mod:`~ddlsim.tools.netcal.fit` fits the link terms of the model ddlsim
costs that library's collective with, :mod:`~ddlsim.calibration.network` writes and reads the
network calibration file and applies it to a cluster (``predict --network-calibration``);
:mod:`~ddlsim.tools.netcal.names` maps hardware as logs and tables name it onto the catalog.
"""
