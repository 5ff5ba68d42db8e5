/**
 * Commands run from a row of the Sessions view (its context menu, its inline buttons). Pure; no
 * `vscode` import.
 *
 * VS Code hands a row's command the row's element, found by the row's handle in the extension
 * host. A row whose parent is redrawn loses its handle there until VS Code has read the parent's
 * children again, and a row whose session closed loses it for good: a menu item chosen then runs
 * the command with `undefined` in the element's place. Run from the palette, the command has no
 * arguments at all. The two must not be taken for each other: a row's command that asked "which
 * session?" acted on whatever was picked, not the row's session.
 */

/** Whether a command's arguments came from a row whose element VS Code could no longer find. */
export function rowLost(args: readonly unknown[]): boolean {
  return args.length > 0 && (args[0] === undefined || args[0] === null);
}

/** Said instead of acting (or asking which session) when a row's command lost its row. */
export function rowLostMessage(title: string): string {
  return (
    `sessiond: ${title} did nothing: its row is no longer in the Sessions view (its session closed, or the view ` +
    'was redrawn as the menu was used). Choose it again on the row, if it is still there.'
  );
}
