import * as vscode from 'vscode';
import type { Sessiond } from '../protocol/live';
import { editorsGo } from '../ui/around';
import { sessionOfComposeName } from '../ui/compose';
import { sessionOfTranscriptPath, TRANSCRIPT_SCHEME } from '../ui/transcript';
import { COMPOSE_SCHEME } from './drafts';
import { toDisposable } from './sessionsTree';

/**
 * A side chat's editors (its transcript, a prompt being written to it) close when it closes or
 * its parent session does, whoever closed it: they stayed open beside a closed parent, the side
 * chat ready for prompts about a session that was gone.
 */
export class SideChatEditors implements vscode.Disposable {
  private readonly subscription: vscode.Disposable;

  constructor(private readonly sessiond: Sessiond) {
    this.subscription = toDisposable(
      sessiond.model.onDidChange((change) => (change.reset || change.sessions.size > 0) && void this.closeGone()),
    );
  }

  private async closeGone(): Promise<void> {
    const model = this.sessiond.model;
    const tabs = vscode.window.tabGroups.all.flatMap((group) => group.tabs).filter((tab) => {
      const session = sessionOfTab(tab);
      return session !== undefined && editorsGo(model, session);
    });
    if (tabs.length) await vscode.window.tabGroups.close(tabs, true).then(undefined, () => undefined);
  }

  dispose(): void {
    this.subscription.dispose();
  }
}

/** The session a transcript's or a compose editor's tab is of. */
function sessionOfTab(tab: vscode.Tab): string | undefined {
  const uri = tab.input instanceof vscode.TabInputText ? tab.input.uri : undefined;
  if (uri?.scheme === TRANSCRIPT_SCHEME) return sessionOfTranscriptPath(uri.path);
  if (uri?.scheme === COMPOSE_SCHEME) return sessionOfComposeName(uri.path.split('/').pop() ?? '');
  return undefined;
}
