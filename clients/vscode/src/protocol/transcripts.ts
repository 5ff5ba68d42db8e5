/**
 * Transcripts that follow their session live.
 *
 * The daemon keeps every transcript (`session/transcript`, by line range). A
 * follower mirrors the last `maxLines` lines of one session: it loads the
 * tail, and whenever a turn event of its session arrives it fetches from its
 * last line on (coalesced), replacing that line, which a chunk may have
 * grown. The pool keeps the `live` most recently opened followers; an older
 * one stops following and is loaded again from the daemon when reopened.
 */
import { Emitter, type Disposable, type Event as Listen } from 'vscode-jsonrpc/node';
import { Coalescer } from './coalesce';
import { isError } from './errors';
import { Methods } from './methods';
import type { Sessiond } from './live';
import type { Event, TranscriptLine } from './types';

export const TRANSCRIPT_LINES = 2000;
export const LIVE_TRANSCRIPTS = 8;

export class TranscriptFollower implements Disposable {
  lines: TranscriptLine[] = [];
  /** Lines in the whole transcript, as the daemon last said. */
  total = 0;
  /** Set when the daemon cannot give transcripts; the lines are then only what was seen live. */
  unavailable: string | undefined;
  private readonly changeEmitter = new Emitter<void>();
  private readonly refresh: Coalescer<'tail'>;
  private readonly subscription: Disposable;
  private loading: Promise<void> | undefined;

  readonly onDidChange: Listen<void> = this.changeEmitter.event;

  constructor(
    private readonly sessiond: Sessiond,
    readonly session: string,
    private readonly maxLines = TRANSCRIPT_LINES,
    refreshMs = 150,
  ) {
    this.refresh = new Coalescer(refreshMs, () => void this.fetchNew());
    this.subscription = sessiond.model.onEvent((event) => this.onEvent(event));
  }

  /** Load the tail; resolves when the lines are there. */
  load(): Promise<void> {
    this.loading ??= this.fetchTail().finally(() => (this.loading = undefined));
    return this.loading;
  }

  dispose(): void {
    this.subscription.dispose();
    this.refresh.dispose();
    this.changeEmitter.dispose();
  }

  private onEvent(event: Event): void {
    if (event.session !== this.session || !event.kind.startsWith('turn.')) return;
    if (this.unavailable) {
      this.lines = appendEventLines(this.lines, event, this.maxLines);
      this.changeEmitter.fire();
    } else {
      this.refresh.add('tail');
    }
  }

  private async fetchTail(): Promise<void> {
    try {
      const transcript = await this.sessiond.request(Methods.sessionTranscript, {
        session: this.session,
        limit: this.maxLines,
      });
      this.lines = transcript.lines;
      this.total = transcript.total;
    } catch (error) {
      if (!isError(error, 'METHOD_NOT_FOUND')) throw error;
      this.unavailable =
        'this daemon has no session/transcript yet: only what happened since this transcript was opened is shown';
    }
    this.changeEmitter.fire();
  }

  /** Fetch from our last line on: it may have grown, and new ones may follow. */
  private async fetchNew(): Promise<void> {
    if (this.loading) await this.loading;
    const offset = Math.max(0, this.total - 1);
    try {
      const transcript = await this.sessiond.request(Methods.sessionTranscript, {
        session: this.session,
        offset,
        limit: this.maxLines,
      });
      if (transcript.total - offset > transcript.lines.length) {
        await this.fetchTail(); // more arrived than one page: take the tail instead
        return;
      }
      const kept = this.lines.filter((line) => line.n < offset);
      this.lines = [...kept, ...transcript.lines].slice(-this.maxLines);
      this.total = transcript.total;
      this.changeEmitter.fire();
    } catch {
      // Disconnected or the session went: the next event or a reopen fetches again.
    }
  }
}

/** The transcript lines an event adds, for daemons without session/transcript. */
export function appendEventLines(lines: TranscriptLine[], event: Event, maxLines: number): TranscriptLine[] {
  const data = event.data ?? {};
  const turn = event.turn ?? null;
  const out = lines.slice();
  const push = (role: TranscriptLine['role'], text: string): void => {
    for (const piece of text.split('\n')) out.push({ n: 0, role, turn, text: piece });
  };
  switch (event.kind) {
    case 'turn.queued':
      push('user', text(data.prompt));
      break;
    case 'turn.chunk': {
      // A chunk continues the reply's last line; its line breaks start new ones.
      const [first, ...rest] = text(data.text).split('\n');
      const last = out[out.length - 1];
      if (last && last.role === 'agent' && last.turn === turn) out[out.length - 1] = { ...last, text: last.text + first };
      else push('agent', first);
      for (const piece of rest) push('agent', piece);
      break;
    }
    case 'turn.thought':
      push('thought', text(data.text));
      break;
    case 'turn.tool':
      push('tool', text(data.title) || text(data.status) || 'tool call');
      break;
    case 'turn.ended': {
      const ending = endingLine(data);
      if (!ending) return lines;
      push('status', ending);
      break;
    }
    default:
      return lines;
  }
  const first = lines.length ? lines[0].n : 0;
  return out.map((line, index) => ({ ...line, n: first + index })).slice(-maxLines);
}

/** The last `live` opened followers stay live; opening another drops the least recently opened. */
export class TranscriptPool implements Disposable {
  private readonly followers = new Map<string, TranscriptFollower>();

  constructor(
    private readonly sessiond: Sessiond,
    private readonly live = LIVE_TRANSCRIPTS,
    private readonly maxLines = TRANSCRIPT_LINES,
    /** Called with a follower the pool lets go of, before it stops following. */
    private readonly onDrop?: (follower: TranscriptFollower) => void,
  ) {}

  /** The follower of `session`, loaded; it becomes the most recently used. */
  async open(session: string): Promise<TranscriptFollower> {
    let follower = this.followers.get(session);
    if (follower) {
      this.followers.delete(session);
      this.followers.set(session, follower);
      return follower;
    }
    follower = new TranscriptFollower(this.sessiond, session, this.maxLines);
    this.followers.set(session, follower);
    while (this.followers.size > this.live) {
      const [oldest, dropped] = this.followers.entries().next().value as [string, TranscriptFollower];
      this.followers.delete(oldest);
      this.onDrop?.(dropped);
      dropped.dispose();
    }
    await follower.load();
    return follower;
  }

  get(session: string): TranscriptFollower | undefined {
    return this.followers.get(session);
  }

  /** Sessions whose transcripts follow live, least recently opened first. */
  liveSessions(): string[] {
    return [...this.followers.keys()];
  }

  dispose(): void {
    for (const follower of this.followers.values()) follower.dispose();
    this.followers.clear();
  }
}

/**
 * The mark a turn that did not complete leaves (as the daemon's transcript `status` lines say it):
 * "interrupted: …", "failed: …", "cancelled by …"; undefined for a completed turn.
 */
export function endingLine(data: Record<string, unknown>): string | undefined {
  const error = text(data.error);
  if (data.outcome === 'interrupted') return error || 'interrupted: the daemon stopped while this turn was running';
  if (error) return `failed: ${error}`;
  if (data.stopReason === 'cancelled') return `cancelled ${text(data.cancelledBy) || 'by the agent'}`;
  return undefined;
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}
