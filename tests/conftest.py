"""What every test may take for granted, however the suite was started."""

from __future__ import annotations

import signal

# A suite started as a background job of a shell without job control (`./dev test &` in a
# script, some CI runners) begins with SIGINT ignored, and so would every process the tests
# start: then nothing can be interrupted, and the tests of Ctrl-C hang. Python's own handler
# it is, here (KeyboardInterrupt) and, as exec resets a handled signal, in every child.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
