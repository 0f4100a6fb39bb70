"""``python -m tau2_gym.cli``: the ``tau2-gym`` command."""

import sys

from tau2_gym.cli import main

sys.exit(main())
