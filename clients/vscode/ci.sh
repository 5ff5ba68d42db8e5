#!/usr/bin/env bash
# Every check of the VS Code extension, as the project's test command runs it:
# npm ci, the protocol types against the daemon's JSON Schema, tsc, eslint,
# node's test runner (against a real daemon with the demo agent), and a .vsix.
# Exits non-zero at the first failure.
#
# The tests start daemons with the repository's .venv (made by `./dev test`);
# SESSIOND_PYTHON and SESSIOND_BIN point them elsewhere. They run under the `node` on
# PATH, and again under each node named in SESSIOND_TEST_NODES (space-separated paths;
# `./dev test` names the node 24 it installs for the real VS Code).
set -euo pipefail
cd "$(dirname "$0")"

say() { printf '\033[1m==> vscode: %s\033[0m\n' "$*" >&2; }

python="${SESSIOND_PYTHON:-../../.venv/bin/python}"
if [ ! -x "$python" ]; then
    echo "clients/vscode/ci.sh: $python is missing: run ./dev test (or set SESSIOND_PYTHON) first" >&2
    exit 1
fi

say "npm ci"
npm ci --no-audit --no-fund --loglevel=error

say "protocol types against protocol/schema/sessiond.schema.json"
node scripts/gen-protocol.mjs --check

say "tsc"
rm -rf out dist
npx tsc -p .

say "eslint"
npx eslint --max-warnings=0 .

# Files, not the folder: node >= 22 reads `--test` arguments as globs, and a folder matches nothing.
# --test-force-exit: a file whose handles outlived its tests (a connection a test left open) once
# kept its process, and the run, waiting with every test passed; the tests still report.
for node in node ${SESSIOND_TEST_NODES:-}; do
    say "tests (node --test under $("$node" --version), against a real daemon)"
    "$node" --test --test-force-exit --test-concurrency=1 out/test/*.test.js
done

say "package"
npm run --silent package >/dev/null
ls -l sessiond.vsix >&2
