/** The client's names and types against the daemon's committed JSON Schema. */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { ErrorCodes } from '../src/protocol/errors';
import { ClientRequests, EventKinds, Methods, Notifications } from '../src/protocol/methods';
import { EXTENSION_DIR, SCHEMA_FILE } from './helpers/daemon';

interface Schema {
  methods: Record<string, unknown>;
  clientRequests: Record<string, unknown>;
  notifications: Record<string, unknown>;
  errors: Record<string, number>;
  $defs: { EventKind: { enum: string[] } };
}

const schema = JSON.parse(readFileSync(SCHEMA_FILE, 'utf8')) as Schema;
const here = EXTENSION_DIR;

test('the generated protocol types are current with the schema', () => {
  // Exits non-zero, naming the command to run, when src/protocol/schema.generated.ts is stale.
  execFileSync(process.execPath, [path.join(here, 'scripts', 'gen-protocol.mjs'), '--check'], { cwd: here, stdio: 'pipe' });
});

test('every method, client request and notification of the schema has one name in methods.ts', () => {
  assert.deepEqual(Object.values(Methods).sort(), Object.keys(schema.methods).sort());
  assert.deepEqual(Object.values(ClientRequests).sort(), Object.keys(schema.clientRequests).sort());
  assert.deepEqual(Object.values(Notifications).sort(), Object.keys(schema.notifications).sort());
});

test('every event kind of the schema has a name in methods.ts', () => {
  assert.deepEqual(Object.values(EventKinds).sort(), [...schema.$defs.EventKind.enum].sort());
});

test('error codes match the schema', () => {
  assert.deepEqual({ ...ErrorCodes }, schema.errors);
});

test('nothing under src/protocol or src/ui imports vscode', () => {
  // The folders' files as they are (no git: the tests also run from a copy or an unpacked tarball).
  const files = ['src/protocol', 'src/ui'].flatMap((dir) =>
    (readdirSync(path.join(here, dir), { recursive: true }) as string[])
      .filter((file) => file.endsWith('.ts'))
      .map((file) => path.join(dir, file)),
  );
  assert.ok(files.length > 5, `found the layer's files: ${files.join(', ')}`);
  for (const file of files) {
    const source = readFileSync(path.join(here, file), 'utf8');
    assert.doesNotMatch(source, /from ['"]vscode['"]|require\(['"]vscode['"]\)/, `${file} imports vscode`);
  }
});
