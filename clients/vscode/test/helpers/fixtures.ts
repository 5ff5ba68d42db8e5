import { FleetModel } from '../../src/protocol/model';
import type { Scheduler } from '../../src/protocol/coalesce';
import type { AgentInfo, Event, SessionInfo, TaskInfo } from '../../src/protocol/types';

let seq = 0;

export function session(id: string, fields: Partial<SessionInfo> = {}): SessionInfo {
  const n = Number(id.replace(/\D/g, '')) || 0;
  const created = new Date(Date.UTC(2026, 10, 29, 9, 0, n)).toISOString();
  return {
    id,
    agent: 'demo',
    root: '/w/project',
    placement: 'here',
    status: 'idle',
    statusSince: created,
    createdAt: created,
    ...fields,
  };
}

export function task(id: string, fields: Partial<TaskInfo> = {}): TaskInfo {
  const n = Number(id.replace(/\D/g, '')) || 0;
  return {
    id,
    agent: 'demo',
    title: `task ${id}`,
    prompt: 'say done',
    status: 'suggested',
    createdAt: new Date(Date.UTC(2026, 10, 29, 11, 0, n)).toISOString(),
    ...fields,
  };
}

export function agent(name: string, fields: Partial<AgentInfo> = {}): AgentInfo {
  return {
    name,
    command: [name],
    envKeys: [],
    options: {},
    process: { state: 'stopped' },
    ...fields,
  };
}

export function event(kind: Event['kind'], fields: Partial<Event> = {}): Event {
  seq += 1;
  return { seq, kind, time: new Date(Date.UTC(2026, 10, 29, 10, 0, 0, seq)).toISOString(), agent: 'demo', ...fields };
}

/** A scheduler whose timers run only when the test says so. */
export class ManualScheduler implements Scheduler {
  private timers = new Map<number, () => void>();
  private next = 1;
  setTimeout(callback: () => void): unknown {
    const id = this.next++;
    this.timers.set(id, callback);
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }
  get pending(): number {
    return this.timers.size;
  }
  runAll(): void {
    const timers = [...this.timers.values()];
    this.timers.clear();
    for (const timer of timers) timer();
  }
}

/** A model with these sessions (and the demo agent), loaded as a listing at `head`. */
export function modelWith(sessions: SessionInfo[], head = 0, scheduler = new ManualScheduler()): FleetModel {
  const model = new FleetModel(100, scheduler);
  model.setAgents([agent('demo', { builtin: true })]);
  model.replaceSessions(sessions, head);
  return model;
}
