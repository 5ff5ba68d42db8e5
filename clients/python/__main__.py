"""``python -m sessiond.client``: the ``sessiond`` command (how a client starts a daemon)."""

import sys

from sessiond.client.cli import main

sys.exit(main())
