"""A small ACP agent for tests, a real process speaking ACP on its stdin and stdout, which does
what the demo agent never does, as its one argument (its mode) says:

- "hang": never answers `session/new`, and stays up; "exit": exits on it; "refuses": refuses it;
- "opens-once": answers the first `session/new` only, and a prompt at once;
- "answers": answers a prompt at once;
- "obeys", "errs", "ignores", "talks": works on a prompt until told to stop (`session/cancel`),
  then answers it cancelled, or fails it, or goes on; "talks" answers a request of the SDK's
  (`session/set_mode`) while its prompt waits, with a stray answer, in one write;
- "works-on": says "on it" (an `agent_message_chunk`) on a prompt, then goes on whatever it is told;
- "opens-late": answers `session/new` 1.5 s late, and notes each `session/close` in `closed.txt`
  beside its script;
- "opens-slowly": answers each `session/new` 0.5 s after it came, noting in `opening.txt` beside
  its script how many it was asked at once at most, and a prompt at once;
- "replays-after-load": names itself gemini-cli and, as it does, answers `session/load` first and
  replays the session's history 0.05 s after (a prompt, an answer, a tool call); answers a prompt with
  "answer N" (N: its prompts so far).
"""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPT = r"""
import json, os, sys, threading, time
mode = sys.argv[1]
prompt = None
opened = opening = most = 0
said = threading.RLock()
def answer(id, result):
    with said:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id, "result": result}) + "\n")
        sys.stdout.flush()
for line in sys.stdin:
    message = json.loads(line)
    method = message.get("method")
    if method == "initialize":
        caps = {"sessionCapabilities": {"close": {}}} if mode == "opens-late" else {}
        result = {"protocolVersion": 1, "agentCapabilities": caps, "authMethods": []}
        if mode == "replays-after-load":
            result["agentCapabilities"] = {"loadSession": True}
            result["agentInfo"] = {"name": "gemini-cli", "version": "0.0.0"}
        answer(message["id"], result)
    elif method == "session/load":
        answer(message["id"], {})
        time.sleep(0.05)  # (the answer read on its own, the turn's prompt sent)
        old = [
            {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "old prompt"}},
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "old answer"}},
            {"sessionUpdate": "tool_call", "toolCallId": "old-call", "title": "WriteFile", "kind": "edit",
             "status": "completed"},
        ]
        with said:
            for update in old:
                params = {"sessionId": message["params"]["sessionId"], "update": update}
                said_now = {"jsonrpc": "2.0", "method": "session/update", "params": params}
                sys.stdout.write(json.dumps(said_now) + "\n")
            sys.stdout.flush()
    elif method == "session/close":
        with open(os.path.join(os.path.dirname(__file__), "closed.txt"), "a") as closed:
            closed.write(message["params"]["sessionId"] + "\n")
        answer(message["id"], {})
    elif method == "session/new" and mode == "opens-late":
        opened += 1
        threading.Timer(1.5, answer, (message["id"], {"sessionId": f"s{opened}"})).start()
    elif method == "session/new" and mode == "opens-slowly":
        opened += 1
        with said:
            opening += 1
            most = max(most, opening)
            with open(os.path.join(os.path.dirname(__file__), "opening.txt"), "w") as noted:
                noted.write(str(most))
        def opened_now(id, result):
            global opening
            with said:
                opening -= 1
            answer(id, result)
        threading.Timer(0.5, opened_now, (message["id"], {"sessionId": f"s{opened}"})).start()
    elif method == "session/new":
        opened += 1
        if mode == "exit":
            sys.exit(3)
        if mode == "refuses":
            error = {"code": -32602, "message": "no such folder", "data": {"cwd": message["params"]["cwd"]}}
            print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}), flush=True)
            continue
        if mode != "hang" and (mode != "opens-once" or opened == 1):
            answer(message["id"], {"sessionId": f"s{opened}"})
    elif method == "session/prompt":
        if mode in ("answers", "opens-once", "opens-slowly"):
            answer(message["id"], {"stopReason": "end_turn"})
        elif mode == "replays-after-load":
            prompted = globals().get("prompted", 0) + 1
            text = {"type": "text", "text": f"answer {prompted}"}
            update = {"sessionUpdate": "agent_message_chunk", "content": text}
            params = {"sessionId": message["params"]["sessionId"], "update": update}
            print(json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params}), flush=True)
            answer(message["id"], {"stopReason": "end_turn"})
        elif mode == "works-on":
            update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "on it"}}
            params = {"sessionId": message["params"]["sessionId"], "update": update}
            print(json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params}), flush=True)
        prompt = message["id"]
    elif method == "session/set_mode" and mode == "talks":
        # An answer nobody waits for, the request's answer, then the prompt's: one write.
        stray = {"jsonrpc": "2.0", "id": prompt + 7, "result": {"stopReason": "refusal"}}
        said = [stray, {"jsonrpc": "2.0", "id": message["id"], "result": {}}]
        said.append({"jsonrpc": "2.0", "id": prompt, "result": {"stopReason": "end_turn"}})
        sys.stdout.write("".join(json.dumps(m) + "\n" for m in said))
        sys.stdout.flush()
    elif method == "session/cancel" and mode == "obeys" and prompt is not None:
        answer(prompt, {"stopReason": "cancelled"})
    elif method == "session/cancel" and mode == "errs" and prompt is not None:
        error = {"code": -32603, "message": "the request was cancelled"}
        print(json.dumps({"jsonrpc": "2.0", "id": prompt, "error": error}), flush=True)
"""


def scripted_agent(folder: Path, mode: str) -> list[str]:
    """The command that runs the agent in `mode` (its script written into `folder`)."""
    script = folder / "scripted_agent.py"
    script.write_text(SCRIPT)
    return [sys.executable, str(script), mode]
