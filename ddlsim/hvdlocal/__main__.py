"""``python -m ddlsim.hvdlocal``: see :mod:`ddlsim.hvdlocal.driver`."""

import sys

from ddlsim.hvdlocal.driver import main

sys.exit(main())
