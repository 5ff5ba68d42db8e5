import * as vscode from 'vscode';

/** The scheme of compose documents: drafts kept by the extension, never files of the person's. */
export const COMPOSE_SCHEME = 'sessiond-prompt';

/** Where the drafts are kept across reloads of the window (workspace state), by document path. */
const STATE_KEY = 'sessiond.composeDrafts';

interface Draft {
  data: Uint8Array;
  mtime: number;
}

/**
 * The file system behind compose documents: one flat folder of drafts, in memory and in the
 * workspace state (an editor VS Code restores after a reload finds its text). A document here is
 * saved as it is typed (see Compose), so closing it never asks to save a file: an untitled
 * document asked "Do you want to save…?" of every draft closed unsent.
 */
export class Drafts implements vscode.FileSystemProvider, vscode.Disposable {
  private readonly drafts = new Map<string, Draft>();
  private readonly changed = new vscode.EventEmitter<vscode.FileChangeEvent[]>();
  readonly onDidChangeFile = this.changed.event;
  private readonly encoder = new TextEncoder();

  constructor(private readonly state: vscode.Memento) {
    const kept = state.get<Record<string, string>>(STATE_KEY) ?? {};
    for (const [path, text] of Object.entries(kept)) this.drafts.set(path, { data: this.encoder.encode(text), mtime: Date.now() });
  }

  /** The text of a draft ('' for none). */
  text(uri: vscode.Uri): string {
    return new TextDecoder().decode(this.readFile(uri));
  }

  /**
   * Empty a draft (sent, or its editor closed), and say so: VS Code keeps a closed document's text
   * a while, and opened it again with the draft thrown away.
   */
  discard(uri: vscode.Uri): void {
    const draft = this.drafts.get(uri.path);
    if (!draft?.data.byteLength) return;
    this.writeFile(uri, new Uint8Array());
  }

  watch(): vscode.Disposable {
    return new vscode.Disposable(() => undefined);
  }

  stat(uri: vscode.Uri): vscode.FileStat {
    if (isRoot(uri)) return { type: vscode.FileType.Directory, ctime: 0, mtime: 0, size: 0 };
    // Any name is a draft, empty until written: a restored editor whose draft is gone opens empty.
    const draft = this.drafts.get(uri.path);
    return { type: vscode.FileType.File, ctime: 0, mtime: draft?.mtime ?? 0, size: draft?.data.byteLength ?? 0 };
  }

  readDirectory(): [string, vscode.FileType][] {
    return [...this.drafts].filter(([, draft]) => draft.data.byteLength).map(([path]) => [path.slice(1), vscode.FileType.File]);
  }

  createDirectory(): void {
    throw vscode.FileSystemError.NoPermissions('compose drafts are one folder');
  }

  readFile(uri: vscode.Uri): Uint8Array {
    return this.drafts.get(uri.path)?.data ?? new Uint8Array();
  }

  writeFile(uri: vscode.Uri, content: Uint8Array): void {
    const before = this.drafts.get(uri.path);
    // Later than the last write, however fast they come: VS Code tells writes apart by mtime.
    const mtime = Math.max(Date.now(), (before?.mtime ?? 0) + 1);
    this.drafts.set(uri.path, { data: content, mtime });
    this.persist();
    this.changed.fire([{ type: before ? vscode.FileChangeType.Changed : vscode.FileChangeType.Created, uri }]);
  }

  delete(uri: vscode.Uri): void {
    this.discard(uri);
  }

  rename(): void {
    throw vscode.FileSystemError.NoPermissions('a compose draft keeps the name of its session');
  }

  private persist(): void {
    const decoder = new TextDecoder();
    const written = [...this.drafts].filter(([, draft]) => draft.data.byteLength);
    const kept = Object.fromEntries(written.map(([path, draft]) => [path, decoder.decode(draft.data)]));
    void this.state.update(STATE_KEY, kept);
  }

  dispose(): void {
    this.changed.dispose();
  }
}

function isRoot(uri: vscode.Uri): boolean {
  return uri.path === '/' || uri.path === '';
}
