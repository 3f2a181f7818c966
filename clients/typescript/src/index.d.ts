// Types of @taskstream/mcp-task-events: following an MCP task's event stream (SEP-2694
// `tasks/stream`) across reconnects with @modelcontextprotocol/sdk 1.x or
// @modelcontextprotocol/client 2.x.

/**
 * What the package uses of an SDK `Client`: `Client` of `@modelcontextprotocol/sdk` 1.x and of
 * `@modelcontextprotocol/client` 2.x both fit, without this package importing either.
 */
export interface Client {
    request(request: { method: string; params?: Record<string, unknown> }, resultSchema: any, options?: any): Promise<any>;
    fallbackNotificationHandler?: (notification: any) => Promise<void>;
    close(): Promise<void>;
}
/** Request options passed on to the SDK (`signal`, `timeout`, ...). */
export type RequestOptions = { signal?: AbortSignal; timeout?: number; [key: string]: unknown };

/** The notification that carries a task event. */
export declare const TASK_EVENT_METHOD: 'notifications/tasks/event';
/** The `_meta` key that names the task an event belongs to. */
export declare const RELATED_TASK_META_KEY: 'io.modelcontextprotocol/related-task';
/** Where taskstream's `tasks/get` reports the retained range of a task's events. */
export declare const EVENTS_META_KEY: 'dev.taskstream/events';
/** Task statuses after which no event is appended. */
export declare const TERMINAL_STATUSES: readonly ['completed', 'failed', 'cancelled'];

/** One task event: the params of a `notifications/tasks/event`. */
export interface TaskEvent {
    taskId: string;
    /** Position in the task's stream: 0, 1, 2, ... without gaps. */
    seq: number;
    /** Vendor-prefixed event type, e.g. `dev.taskstream.tick`. Ignore types you do not know. */
    type: string;
    /** Untrusted data from the task: never execute it; sanitise what you render. */
    payload: Record<string, unknown>;
    _meta?: Record<string, unknown>;
    /** Set on a checkpoint event (type `dev.taskstream.checkpoint`, payload `{coversThrough, state}`). */
    checkpoint?: Checkpoint;
    /** Set on the first event after a gap (`onEventsGone: 'recover'`): the range lost before it. */
    afterGap?: Gap;
    /**
     * True when the follow started (or restarted, after a gap) from this checkpoint: the host
     * replaces its state with `checkpoint.state`, which covers `afterGap`, and the events after
     * it follow.
     */
    fromCheckpoint?: true;
    [key: string]: unknown;
}

/** A checkpoint event's payload: the task's state after every event up to `coversThrough`. */
export interface Checkpoint {
    coversThrough: number;
    state: Record<string, unknown>;
}
/** The type of a checkpoint event. */
export declare const CHECKPOINT_EVENT_TYPE: 'dev.taskstream.checkpoint';
/** An event as a checkpoint, or `undefined` when it is not one (or its payload is not of that shape). */
export declare function checkpointOf(event: { type?: string; payload?: unknown }): Checkpoint | undefined;

/** Where the cursors (the last processed seq of each task) are kept. */
export interface CursorStore {
    load(taskId: string): number | undefined | Promise<number | undefined>;
    /** Called only after the host's handler returned for the event `seq`. */
    save(taskId: string, seq: number): void | Promise<void>;
}

/** Cursors in memory. */
export declare class MemoryCursorStore implements CursorStore {
    load(taskId: string): number | undefined;
    save(taskId: string, seq: number): void;
    delete(taskId: string): void;
}

/** Cursors in a directory, one JSON file per task, replaced atomically (and durably, unless `sync: false`). */
export declare class FileCursorStore implements CursorStore {
    constructor(dir: string, options?: { sync?: boolean });
    pathOf(taskId: string): string;
    load(taskId: string): Promise<number | undefined>;
    save(taskId: string, seq: number): Promise<void>;
}

/** The server no longer retains the events after the cursor (`-32010`, `data.reason: "events_gone"`). */
export declare class EventsGoneError extends Error {
    readonly taskId: string;
    /** The oldest seq the server still retains; `after = earliestSeq - 1` resumes from it. */
    readonly earliestSeq: number;
    /** The `after` that was refused (undefined: the stream had no cursor). */
    readonly after: number | undefined;
    readonly code: number;
}

/** The server broke the stream's rules (a gap, a reordering, an event of another task, no related-task `_meta`). */
export declare class StreamViolationError extends Error {
    readonly taskId: string;
    readonly cursor: number | undefined;
    readonly event: unknown;
}

/** The connection was lost and could not be replaced. */
export declare class ConnectionLostError extends Error {}

/** Whether an error from an SDK request means the connection, not the server, failed. */
export declare function isConnectionLost(error: unknown): boolean;

/** A lost range of seqs, both ends included, accepted under `onEventsGone: 'recover'`. */
export interface Gap {
    first: number;
    last: number;
    why: 'events_gone' | 'earliest retained event' | 'started past the cursor';
}

export interface FollowOptions {
    /** A connected SDK client (1.x or 2.x). */
    client: Client;
    taskId: string;
    /** Default: a new MemoryCursorStore. */
    cursors?: CursorStore;
    /** Start after this seq instead of the stored cursor (a larger one records the skipped range as a gap). */
    after?: number;
    /**
     * Makes a new connected client after the connection was lost (`lost` is the old one, to
     * close). Without it a lost connection ends the follow with ConnectionLostError.
     */
    reconnect?: (lost: Client, error: unknown) => Promise<Client>;
    /** `'fail'` (default): throw EventsGoneError. `'recover'`: resume from `earliestSeq - 1` and report the gap. */
    onEventsGone?: 'fail' | 'recover';
    /** Called with every gap accepted under `'recover'`. */
    onGap?: (gap: Gap) => void;
    /** A stream quiet this long is checked with `tasks/get` and reopened (default 30 000). */
    idleTimeoutMs?: number;
    /** Reconnects in a row without a processed event before giving up (default 8). */
    maxReconnects?: number;
    /** `events_gone` recoveries in one follow (default 4). */
    maxGoneRecoveries?: number;
    /** Whether an event without related-task `_meta` naming its task is a violation (default true). */
    requireRelatedTask?: boolean;
    /** Aborting it cancels the follow (as `cancel()`). */
    signal?: AbortSignal;
}

export interface FollowOutcome {
    /** The task's terminal status (undefined when the follow was cancelled or left). */
    status: string | undefined;
    /** The last `tasks/get` result. */
    task: Record<string, unknown> | undefined;
    /** The last processed seq. */
    cursor: number | undefined;
    gaps: Gap[];
    cancelled: boolean;
}

export interface FollowStats {
    events: number;
    duplicates: number;
    streams: number;
    reopens: number;
    reconnects: number;
    goneRecoveries: number;
    /** The `after` of every `tasks/stream` opened, in order. */
    afters: (number | undefined)[];
    /** The seqs of the checkpoints the follow started from after a gap. */
    checkpointStarts: number[];
}

/** One follow of one task: iterate it once (`for await`), or call `run` once. */
export declare class TaskFollow implements AsyncIterable<TaskEvent> {
    constructor(options: FollowOptions);
    readonly taskId: string;
    /** The client read from now (a new one after a reconnect). */
    readonly client: Client;
    /** The last processed (committed) seq. */
    readonly cursor: number | undefined;
    readonly gaps: Gap[];
    readonly stats: FollowStats;
    /** Set when the follow has ended. */
    readonly outcome: FollowOutcome | undefined;
    /** Stops reading (cancels the `tasks/stream` request); the task runs on. */
    cancel(reason?: unknown): void;
    /** Awaits `handler` for each event, commits its seq after it returned; resolves when the task is terminal. */
    run(handler: (event: TaskEvent) => unknown | Promise<unknown>): Promise<FollowOutcome>;
    /** An event is committed when the next one is asked for (the loop body returned). */
    [Symbol.asyncIterator](): AsyncIterator<TaskEvent>;
}

/** Follows one task's events to its terminal status, across reconnects. */
export declare function followTask(options: FollowOptions): TaskFollow;

export interface EventRange {
    status: string;
    terminal: boolean;
    /** Oldest retained seq (undefined: the server does not report it). */
    earliestSeq: number | undefined;
    /** Newest retained seq, null when none is retained. */
    latestSeq: number | null | undefined;
    /** The seq of the next event. */
    nextSeq: number | undefined;
    task: Record<string, unknown>;
}

/** `tasks/get`: the status and the retained range of a task's events, without a replay. */
export declare function getEventRange(client: Client, taskId: string, options?: RequestOptions): Promise<EventRange>;

/** `tasks/cancel`: ends the task itself (a follow then gets its `cancelled` status event). */
export declare function cancelTask(client: Client, taskId: string, options?: RequestOptions): Promise<Record<string, unknown>>;
