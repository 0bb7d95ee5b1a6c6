"""The ``ddlsim`` command line (argument parsing, reports, exit codes)."""
