"""A coordinator and its workers: threads in worktrees, their reports, then merged one at a time.

    python examples/coordinator.py

It makes a small git repository in a temporary folder, opens a coordinator
session there, and starts three threads of it, each in a git worktree of its
own, to write one part of the job. It waits for their reports (reply, plan,
changed files), then merges their branches back into main through the merge
queue, one at a time, each after a gate command passes. It uses the demo
agent, whose prompts are little scripts; with a real agent they would be prose.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from sessiond.client import connect

PARTS = {
    "parser": "def parse(text):\n    return text.split()\n",
    "printer": "def show(words):\n    print(' '.join(words))\n",
    "docs": "# toy\n\nParses and prints words.\n",
}
# The gate runs in the session's worktree on the merged result: here, every Python file must parse.
GATE = "python3 -c \"import ast, pathlib; [ast.parse(p.read_text()) for p in pathlib.Path().glob('*.py')]\""


def git(repo: Path, *args: str) -> str:
    identity = ["-c", "user.name=coordinator", "-c", "user.email=coordinator@example.invalid"]
    done = subprocess.run(["git", *identity, *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout


def make_repo() -> Path:
    repo = Path(tempfile.mkdtemp(prefix="sessiond-coordinator-"))
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("# toy\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "start")
    return repo


def prompt_for(part: str) -> str:
    name = "NOTES.md" if part == "docs" else f"{part}.py"
    text = PARTS[part].replace("\n", "\\n")
    return "\n".join(
        [
            f"plan Write {name} | Report",
            "progress 1 in_progress",
            f"write {name} {text}",
            "progress 1 completed",
            "progress 2 completed",
            f"say {part}: wrote {name}",
        ]
    )


def main() -> int:
    repo = make_repo()
    print(f"repository {repo}")
    with connect(run="coordinator") as daemon:
        coordinator = daemon.agent("demo").session(repo, title="coordinator")
        threads = {
            part: coordinator.thread(prompt_for(part), placement="worktree", title=part) for part in PARTS
        }
        print(f"coordinator {coordinator.id} started {len(threads)} threads, each in a worktree")
        reports = daemon.wait_threads(list(threads.values()), timeout=120)
        for part, report in zip(threads, reports, strict=True):
            plan = f"plan {report.plan.done}/{report.plan.total}" if report.plan else "no plan"
            files = [f.path for f in report.changes.files] if report.changes else []
            changed = f", changed {', '.join(files)}" if files else ""
            print(f"report {part}: {report.status.value}, {plan}, {report.reply!r}{changed}")
        for part, thread in threads.items():  # through the merge queue, one at a time
            entry = thread.merge(gate=GATE, base_branch="main")
            print(f"merge {part}: {entry.status}{f' ({entry.reason})' if entry.reason else ''}")
        tree = coordinator.tree()
        print(f"tree: {tree.session.id} with {len(tree.children)} threads, {tree.tokens} tokens")
    print("main now:")
    for line in git(repo, "log", "--oneline", "--format=%s").splitlines():
        print(f"  {line}")
    print(f"files: {', '.join(sorted(p.name for p in repo.iterdir() if not p.name.startswith('.')))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
