"""Generate the JSON Schema of the wire contract from the models.

python -m sessiond.protocol.schema          # rewrite protocol/schema/sessiond.schema.json
python -m sessiond.protocol.schema --check  # exit 1 if the committed file is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from sessiond.protocol.errors import ErrorCode
from sessiond.protocol.methods import CLIENT_REQUESTS, METHODS, NOTIFICATIONS

SCHEMA_PATH = Path(__file__).parent / "schema" / "sessiond.schema.json"


def generate() -> dict[str, Any]:
    models: list[tuple[type[BaseModel], Literal["validation", "serialization"]]] = []
    for method in METHODS.values():
        models.append((method.params, "validation"))
        models.append((method.result, "serialization"))
    for notification in NOTIFICATIONS.values():
        models.append((notification.params, "serialization"))
    for request in CLIENT_REQUESTS.values():
        models.append((request.params, "serialization"))
        models.append((request.result, "validation"))
    refs, schema = models_json_schema(models, by_alias=True, ref_template="#/$defs/{model}")

    def ref(model: type[BaseModel], mode: Literal["validation", "serialization"]) -> Any:
        return refs[(model, mode)]

    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "sessiond protocol",
        "description": "JSON-RPC 2.0 with LSP framing. Generated from sessiond.protocol; do not edit.",
        "methods": {
            name: {
                "summary": method.summary,
                "params": ref(method.params, "validation"),
                "result": ref(method.result, "serialization"),
            }
            for name, method in sorted(METHODS.items())
        },
        "notifications": {
            name: {"summary": n.summary, "params": ref(n.params, "serialization")}
            for name, n in sorted(NOTIFICATIONS.items())
        },
        "clientRequests": {
            name: {
                "summary": r.summary,
                "params": ref(r.params, "serialization"),
                "result": ref(r.result, "validation"),
            }
            for name, r in sorted(CLIENT_REQUESTS.items())
        },
        "errors": {code.name: int(code) for code in ErrorCode},
        "$defs": schema.get("$defs", {}),
    }


def render() -> str:
    return json.dumps(generate(), indent=2, sort_keys=True) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="fail if the committed schema is stale")
    args = parser.parse_args()
    text = render()
    if args.check:
        current = SCHEMA_PATH.read_text() if SCHEMA_PATH.exists() else ""
        if current != text:
            print(f"{SCHEMA_PATH} is stale: run `python -m sessiond.protocol.schema`", file=sys.stderr)
            return 1
        return 0
    SCHEMA_PATH.parent.mkdir(exist_ok=True)
    SCHEMA_PATH.write_text(text)
    print(f"wrote {SCHEMA_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
