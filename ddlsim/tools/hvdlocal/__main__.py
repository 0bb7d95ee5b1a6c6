"""``python -m ddlsim.tools.hvdlocal``: see :mod:`ddlsim.tools.hvdlocal.driver`."""

import sys

from ddlsim.tools.hvdlocal.driver import main

sys.exit(main())
