"""``python -m ddlsim``: the same as the ``ddlsim`` command."""

import sys

from ddlsim.cli.main import main

sys.exit(main())
