import { ResponseError } from 'vscode-jsonrpc/node';
import { ErrorCodes } from './schema.generated';

export { ErrorCodes };

export type ErrorName = keyof typeof ErrorCodes;

/** The name of a daemon error code (`SESSION_NOT_FOUND`), if it is one of the daemon's. */
export function errorName(code: number): ErrorName | undefined {
  return (Object.keys(ErrorCodes) as ErrorName[]).find((name) => ErrorCodes[name] === code);
}

/** True when `error` is the daemon's answer with this code. */
export function isError(error: unknown, name: ErrorName): boolean {
  return error instanceof ResponseError && error.code === ErrorCodes[name];
}

/** A one-line description of a failed request for a person: what failed and the daemon's sentence. */
export function describeError(method: string, error: unknown): string {
  if (error instanceof ResponseError) {
    const name = errorName(error.code) ?? `error ${error.code}`;
    return `sessiond ${method} failed (${name}): ${error.message}`;
  }
  return `sessiond ${method} failed: ${error instanceof Error ? error.message : String(error)}`;
}

/** What a person is shown of a failed request: the daemon's own sentence ("sessiond: the prompt is …"); the log has the method and code. */
export function errorSentence(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return `sessiond: ${text}`;
}
