import * as vscode from 'vscode';
import type { Sessiond } from '../protocol/live';
import { TranscriptPool, type TranscriptFollower } from '../protocol/transcripts';
import { renderTranscript, sessionOfTranscriptPath, TRANSCRIPT_SCHEME, transcriptHead, transcriptPath } from '../ui/transcript';
import { toDisposable } from './sessionsTree';

/**
 * Read-only transcript documents. The last eight opened follow their session
 * live; an older one keeps the text it had when it was let go, until it is
 * opened again (which loads it anew from the daemon).
 */
export class Transcripts implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly pool: TranscriptPool;
  private readonly following = new Map<string, vscode.Disposable>();
  private readonly uris = new Map<string, vscode.Uri>();
  /** The last text of documents no longer followed, by session. */
  private readonly frozen = new Map<string, string>();
  private readonly closed: vscode.Disposable;
  private readonly modelChanged: vscode.Disposable;
  private readonly stateChanged: vscode.Disposable;
  /** The header line each followed document was last drawn with (its session's name, agent, status). */
  private readonly heads = new Map<string, string>();

  constructor(private readonly sessiond: Sessiond) {
    this.pool = new TranscriptPool(sessiond, undefined, undefined, (follower) => this.freeze(follower));
    // A request asked or settled changes the "waiting for you" mark of its session's document; a
    // status (or title) changed, its header (which said "closed" after a reopen, until a turn came).
    this.modelChanged = toDisposable(
      sessiond.model.onDidChange((change) => {
        for (const [session, uri] of this.uris) {
          if (!this.following.has(session)) continue;
          const drawn = this.heads.get(session);
          const head = transcriptHead(sessiond.model.sessions.get(session), session);
          if (change.permissions || change.reset || (change.sessions.has(session) && drawn !== head)) this.changed.fire(uri);
        }
      }),
    );
    // Connected or not: the documents say whether they follow live.
    this.stateChanged = toDisposable(
      sessiond.onDidChangeState(() => {
        for (const [session, uri] of this.uris) if (this.following.has(session)) this.changed.fire(uri);
      }),
    );
    this.closed = vscode.workspace.onDidCloseTextDocument((document) => {
      if (document.uri.scheme !== TRANSCRIPT_SCHEME) return;
      const session = sessionOfTranscriptPath(document.uri.path);
      if (session) this.frozen.delete(session);
    });
  }

  async open(session: string, preserveFocus = false): Promise<void> {
    const uri = await this.follow(session);
    const document = await vscode.workspace.openTextDocument(uri);
    await vscode.window.showTextDocument(document, { preview: true, preserveFocus });
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const session = sessionOfTranscriptPath(uri.path);
    if (!session) return `# not a sessiond transcript: ${uri.toString()}`;
    const frozen = this.frozen.get(session);
    if (frozen !== undefined) return frozen;
    let follower = this.pool.get(session);
    if (!follower) {
      // A document VS Code restored, or opened by its address: start following it.
      try {
        await this.follow(session);
        follower = this.pool.get(session);
      } catch (error) {
        return `# could not load the transcript of ${session}: ${String(error)}`;
      }
    }
    return follower ? this.render(follower, true) : `# the transcript of ${session} is not loaded`;
  }

  private render(follower: TranscriptFollower, live: boolean): string {
    const session = this.sessiond.model.sessions.get(follower.session);
    if (live) this.heads.set(follower.session, transcriptHead(session, follower.session));
    return renderTranscript(follower.lines, {
      session,
      sessionId: follower.session,
      total: follower.total,
      shown: follower.lines.length,
      live,
      connected: this.sessiond.state === 'connected',
      note: follower.unavailable,
      waiting: this.sessiond.model.permissionsOf(follower.session).map((p) => p.toolCall.title ?? p.toolCall.kind ?? 'a permission request'),
    });
  }

  private async follow(session: string): Promise<vscode.Uri> {
    const title = this.sessiond.model.sessions.get(session)?.title;
    const uri = this.uris.get(session) ?? vscode.Uri.from({ scheme: TRANSCRIPT_SCHEME, path: transcriptPath(session, title) });
    this.uris.set(session, uri);
    this.frozen.delete(session);
    const follower = await this.pool.open(session);
    this.following.get(session)?.dispose();
    this.following.set(session, toDisposable(follower.onDidChange(() => this.changed.fire(uri))));
    this.changed.fire(uri);
    return uri;
  }

  private freeze(follower: TranscriptFollower): void {
    this.frozen.set(follower.session, this.render(follower, false));
    this.following.get(follower.session)?.dispose();
    this.following.delete(follower.session);
    this.heads.delete(follower.session);
    const uri = this.uris.get(follower.session);
    if (uri) this.changed.fire(uri);
  }

  dispose(): void {
    for (const subscription of this.following.values()) subscription.dispose();
    this.pool.dispose();
    this.changed.dispose();
    this.closed.dispose();
    this.modelChanged.dispose();
    this.stateChanged.dispose();
  }
}
