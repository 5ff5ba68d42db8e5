"""Fan one job out over every file of a directory: a session apiece, answers in order.

    python examples/fanout.py [DIRECTORY]

Without a directory it works on a small sample project, written afresh on each
run into the daemon's state folder (`sample-project` there: one folder however
often it runs). It uses the built-in demo agent, which needs no model: each
prompt is a little script (read the file, plan, say what it found). With a
real agent the prompt would be prose ("review this file and list its bugs").
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

from sessiond.client import connect
from sessiond.protocol.paths import state_dir

SAMPLE = {
    "app.py": "def main():\n    print('hello')\n",
    "util.py": "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n",
    "README.md": "# sample\n\nA project to fan out over.\n",
    "tests/test_util.py": "from util import add\n\ndef test_add():\n    assert add(1, 2) == 3\n",
}


def sample_project() -> Path:
    root = state_dir() / "sample-project"
    shutil.rmtree(root, ignore_errors=True)  # written afresh: what an earlier run left goes
    for name, text in SAMPLE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def prompt_for(path: Path) -> str:
    steps = ["plan read | report", "progress 1 in_progress", f"read {path}", "progress 1 completed"]
    report = ["progress 2 in_progress", f"say reviewed {path.name}", "progress 2 completed"]
    return "\n".join([*steps, *report])


def main() -> int:
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else sample_project()
    files = sorted(p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts)
    print(f"fanning out over {len(files)} files in {root}")
    with connect() as daemon:
        agent = daemon.agent("demo")
        started = time.monotonic()
        replies = agent.batch([prompt_for(p) for p in files], root)
        elapsed = time.monotonic() - started
        for path, reply in zip(files, replies, strict=True):
            print(f"{path.relative_to(root)}: {' / '.join(reply.text.splitlines())}")
        status = daemon.status()
    print(f"{len(replies)} sessions in {elapsed:.2f} s")
    print(f"daemon {status.version} at {status.socket} (pid {status.pid})")
    print("the daemon keeps running for the next client: `sessiond status` shows it, `sessiond stop` ends it")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
