"""Named points where a round worker can be made to die, to test that dying anywhere is safe.

`STEPWISE_FAILPOINTS=train.recorded,enqueue.written` makes the process SIGKILL itself when it
reaches either point: no cleanup runs, no exception handler sees it, exactly as if the machine
had lost power there. Unset (always, outside tests), a failpoint costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal


def failpoint(name: str) -> None:
    armed = os.environ.get("STEPWISE_FAILPOINTS")
    if armed and name in armed.split(","):
        os.kill(os.getpid(), signal.SIGKILL)
