/** The wire types, generated from the daemon's JSON Schema, and helpers over them. */
import type { ProtocolClientRequests, ProtocolMethods } from './schema.generated';

export type * from './schema.generated';

export type MethodName = keyof ProtocolMethods;
export type ParamsOf<M extends MethodName> = ProtocolMethods[M]['params'];
export type ResultOf<M extends MethodName> = ProtocolMethods[M]['result'];
export type ClientRequestName = keyof ProtocolClientRequests;

/** One option of a permission request, as ACP gives it. */
export interface PermissionOption {
  optionId: string;
  name: string;
  kind?: string;
}

/** An ACP tool call, as far as this client reads it. */
export interface ToolCallView {
  toolCallId?: string;
  title?: string;
  kind?: string;
  status?: string;
  locations?: { path: string; line?: number }[];
}
