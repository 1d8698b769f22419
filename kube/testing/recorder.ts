/**
 * An EventRecorder that keeps every Event in memory instead of writing it, so a reconciler test
 * can assert on the reason, type, message and involved object of what was recorded without a
 * background writer, correlation or a fake API server.
 *
 * @module
 */
import { type EventRecorder, type EventSubject, type EventType, sprintf } from "../events.ts";
import { deepCopy, type KubeObject } from "../object.ts";
import { apiVersionOf } from "../resource.ts";

/** One recorded Event; object is a copy of the subject as it was when the Event was recorded. */
export interface RecordedEvent {
  type: EventType;
  reason: string;
  message: string;
  object: KubeObject;
}

/** Records Events in call order; see the module doc. */
export class RecordingRecorder implements EventRecorder {
  /** Every Event recorded so far, oldest first. */
  readonly events: RecordedEvent[] = [];

  event(subject: EventSubject, type: EventType, reason: string, message: string): void {
    this.events.push({ type, reason, message, object: subjectObject(subject) });
  }

  eventf(
    subject: EventSubject,
    type: EventType,
    reason: string,
    format: string,
    ...args: unknown[]
  ): void {
    this.event(subject, type, reason, sprintf(format, args));
  }

  /** The recorded Events with this reason. */
  withReason(reason: string): RecordedEvent[] {
    return this.events.filter((e) => e.reason === reason);
  }

  /** "Type Reason" of every recorded Event, in order (compact for deepEqual assertions). */
  summary(): string[] {
    return this.events.map((e) => `${e.type} ${e.reason}`);
  }

  /** Forgets what was recorded (between the steps of one test). */
  clear(): void {
    this.events.length = 0;
  }
}

/** The subject as an object carrying apiVersion and kind, copied so later edits do not leak. */
function subjectObject(subject: EventSubject): KubeObject {
  if ("resource" in subject && "object" in subject) {
    const copy = deepCopy(subject.object);
    copy.apiVersion ||= apiVersionOf(subject.resource);
    copy.kind ||= subject.resource.kind;
    return copy;
  }
  return deepCopy(subject);
}
