import * as vscode from 'vscode';
import { execFile } from 'node:child_process';
import { mkdir, readFile } from 'node:fs/promises';
import * as path from 'node:path';
import { timelineArgs, timelineTitle } from '../ui/timeline';

/**
 * Write the timeline with the `sessiond` command line and show it in a tab of its own (a webview:
 * the page is one self-contained file, its script drawing on a canvas, fetching nothing).
 * The file is kept in the extension's own folder (`storage`), one per run, written afresh each
 * time: it opens in any browser, and opening a timeline again leaves no second copy behind.
 */
export async function openTimeline(
  sessiondPath: string,
  socket: string | undefined,
  run: string | undefined,
  storage: string,
): Promise<string> {
  const folder = path.join(storage, 'timelines');
  await mkdir(folder, { recursive: true });
  const file = path.join(folder, `${run ?? 'last-hour'}.html`);
  await new Promise<void>((resolve, reject) =>
    execFile(sessiondPath, timelineArgs(run, file, socket), { maxBuffer: 16 * 1024 * 1024 }, (error, _stdout, stderr) => {
      if (error) reject(new Error(stderr.trim().replace(/^sessiond: /, '') || error.message));
      else resolve();
    }),
  );
  const panel = vscode.window.createWebviewPanel('sessiond.timeline', timelineTitle(run), vscode.ViewColumn.Active, {
    enableScripts: true,
    localResourceRoots: [],
  });
  panel.webview.html = await readFile(file, 'utf8');
  return file;
}
