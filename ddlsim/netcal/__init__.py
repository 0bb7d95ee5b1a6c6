"""Communication calibrated from measured collectives: ``ddlsim calibrate network``.

:mod:`~ddlsim.netcal.logs` reads collective benchmark output (nccl-tests, OSU, the host sweeps
this repository records), :mod:`~ddlsim.netcal.fit` fits the link terms of the model ddlsim
costs that library's collective with, :mod:`~ddlsim.netcal.calfile` writes and reads the
network calibration file and applies it to a cluster (``predict --network-calibration``);
:mod:`~ddlsim.netcal.names` maps hardware as logs and tables name it onto the catalog.
"""
