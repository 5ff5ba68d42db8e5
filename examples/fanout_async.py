"""The fan-out of fanout.py with the async client, written down as a run.

    python examples/fanout_async.py [DIRECTORY]

One session apiece over every file of a directory, answers in order, with
``aconnect(run=...)``: the sessions carry the run, and closing the client ends
it (completed; failed if an exception leaves the block; stopped on Ctrl-C or
when the task is cancelled). ``sessiond runs`` lists it afterwards with its
wall time beside its turns' time added up.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from fanout import prompt_for, sample_project

from sessiond.client import aconnect


async def main() -> int:
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else sample_project()
    files = sorted(p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts)
    print(f"fanning out over {len(files)} files in {root}")
    async with aconnect(run="fanout-async") as daemon:
        agent = await daemon.agent("demo")
        replies = await agent.abatch([prompt_for(p) for p in files], root)
        for path, reply in zip(files, replies, strict=True):
            print(f"{path.relative_to(root)}: {' / '.join(reply.text.splitlines())}")
        assert daemon.run is not None
        run_id = daemon.run.id
    # The run ended when the block did; read how it went.
    async with aconnect() as daemon:
        run = await daemon.get_run(run_id)
    print(f"run {run.id} {run.outcome}: {run.sessions} sessions, {run.turns} turns")
    print(f"turns ran {run.serial_seconds:.2f} s in all; took {run.wall_seconds:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
