/**
 * An EventRecorder for unit tests: keeps every Event in call order instead of writing it, so a
 * test asserts on what a reconciler announced without a correlator or an API in between.
 *
 * @module
 */
import { type EventRecorder, type EventSubject, type EventType, sprintf } from "../events.ts";
import type { KubeObject } from "../object.ts";

/** One recorded Event: its type, reason, formatted message and the object it is about. */
export interface RecordedEvent {
  type: EventType;
  reason: string;
  message: string;
  object: KubeObject;
}

/** Records Events in memory; never throws, never blocks, like the real recorder. */
export class RecordingRecorder implements EventRecorder {
  /** Every Event in the order it was recorded. */
  readonly events: RecordedEvent[] = [];

  event(subject: EventSubject, type: EventType, reason: string, message: string): void {
    const object = "resource" in subject && "object" in subject ? subject.object : subject;
    // A snapshot: the reconciler keeps mutating the object it reported on.
    this.events.push({ type, reason, message, object: structuredClone(object) as KubeObject });
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

  /** Forgets what was recorded so far (between steps of one test). */
  clear(): void {
    this.events.length = 0;
  }
}
