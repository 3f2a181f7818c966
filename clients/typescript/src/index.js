// Follow an MCP task's event stream (SEP-2694 `tasks/stream`) across reconnects, with the
// official TypeScript SDK's `Client`: `@modelcontextprotocol/sdk` 1.x, or
// `@modelcontextprotocol/client` 2.x.
//
// The client half of the resume contract:
// - the cursor of a task is the seq of the last event the host *processed*; it is committed to
//   the cursor store only after the host's handler returned for that event (RS-08), and every
//   (re)opened stream sends it as `after` (RS-09);
// - events at or below the cursor are duplicates and are dropped by (taskId, seq) (RS-10, RS-11);
// - the next event must be exactly cursor + 1 and name its task in params and in the
//   related-task `_meta`: anything else is a StreamViolationError, never accepted silently
//   (EV-03, NT-01, NT-02, RS-07);
// - `events_gone` is an EventsGoneError carrying `earliestSeq`; with `onEventsGone: 'recover'`
//   the follow resumes from `earliestSeq - 1` and reports the lost range as a gap (EG-02);
// - a stream that ends (or stays quiet) while the task runs is reopened from the cursor (TS-04);
//   a lost connection is replaced through the host's `reconnect` callback;
// - the follow ends when the task is terminal and every retained event was processed.
//
// No runtime dependency at all: the host brings its SDK (a peer dependency), and the package
// only calls the `Client` it is given.

import { mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';

/** The notification that carries a task event. */
export const TASK_EVENT_METHOD = 'notifications/tasks/event';
/** The `_meta` key that names the task an event belongs to. */
export const RELATED_TASK_META_KEY = 'io.modelcontextprotocol/related-task';
/** Where taskstream's `tasks/get` reports the retained range of a task's events. */
export const EVENTS_META_KEY = 'dev.taskstream/events';
/** Task statuses after which no event is appended. */
export const TERMINAL_STATUSES = Object.freeze(['completed', 'failed', 'cancelled']);
/** The type of a checkpoint event: `{coversThrough, state}`, the task's state after every event up to `coversThrough`. */
export const CHECKPOINT_EVENT_TYPE = 'dev.taskstream.checkpoint';

/**
 * An event as a checkpoint: `{coversThrough, state}` when its type is `dev.taskstream.checkpoint`
 * and its payload has that shape, else `undefined`.
 * @param {{type?: string, payload?: any}} event
 */
export function checkpointOf(event) {
    if (event?.type !== CHECKPOINT_EVENT_TYPE) return undefined;
    const { coversThrough, state } = event.payload ?? {};
    if (!Number.isSafeInteger(coversThrough) || coversThrough < 0) return undefined;
    if (state === null || typeof state !== 'object' || Array.isArray(state)) return undefined;
    return { coversThrough, state };
}

/**
 * The result schema handed to `client.request`: any result, as it came. It speaks both SDKs'
 * schema protocols, so that the package imports neither: SDK 1.x calls `safeParse` (a Zod 3
 * shaped schema), SDK 2.x validates through Standard Schema's `~standard`.
 */
const ANY_RESULT = Object.freeze({
    safeParse: data => ({ success: true, data }),
    parse: data => data,
    '~standard': Object.freeze({ version: 1, vendor: 'mcp-task-events', validate: value => ({ value }) }),
});
// SDK 2.x's SdkError codes that mean the connection failed.
const LOST_CODES = new Set(['CONNECTION_CLOSED', 'REQUEST_TIMEOUT', 'SEND_FAILED', 'NOT_CONNECTED']);
// The SDK times every request out; a stream lasts as long as its task, so the follow keeps its
// own idle timer instead and gives the SDK the longest timer Node accepts.
const NO_SDK_TIMEOUT = 2_147_483_647;

// --- errors --------------------------------------------------------------------------------

/** The server no longer retains the events after the cursor (`-32010`, reason `events_gone`). */
export class EventsGoneError extends Error {
    /**
     * @param {{taskId: string, earliestSeq: number, after: number | undefined, code?: number}} info
     */
    constructor({ taskId, earliestSeq, after, code = -32010 }) {
        const from = after === undefined ? 0 : after + 1;
        super(`events ${from}..${earliestSeq - 1} of task ${taskId} are gone; the earliest retained is ${earliestSeq}`);
        this.name = 'EventsGoneError';
        this.taskId = taskId;
        this.earliestSeq = earliestSeq;
        this.after = after;
        this.code = code;
    }
}

/** The server broke the stream's rules: a gap, a reordering, an event of another task. */
export class StreamViolationError extends Error {
    /** @param {string} message @param {{taskId: string, cursor: number | undefined, event?: unknown}} info */
    constructor(message, { taskId, cursor, event }) {
        super(message);
        this.name = 'StreamViolationError';
        this.taskId = taskId;
        this.cursor = cursor;
        this.event = event;
    }
}

/** The connection was lost and no `reconnect` callback could replace it. */
export class ConnectionLostError extends Error {
    /** @param {string} message @param {unknown} cause */
    constructor(message, cause) {
        super(message, { cause });
        this.name = 'ConnectionLostError';
    }
}

/** Whether an error from an SDK request means the connection (not the server) failed. */
export function isConnectionLost(error) {
    const code = error?.code;
    // SDK 1.x: McpError, numeric: -32000 ConnectionClosed, -32001 RequestTimeout; anything else
    // numeric is the server's answer. SDK 2.x: SdkError, a string code.
    if (typeof code === 'number') return code === -32000 || code === -32001;
    if (typeof code === 'string') return LOST_CODES.has(code);
    return true; // a transport failure (fetch, a broken pipe)
}

function eventsGoneOf(error, taskId, after) {
    const data = typeof error?.code === 'number' ? error.data : undefined;
    if (data?.reason !== 'events_gone') return undefined;
    const earliestSeq = data.earliestSeq;
    if (!Number.isSafeInteger(earliestSeq) || earliestSeq < 0) return undefined;
    return new EventsGoneError({ taskId, earliestSeq, after, code: error.code });
}

// --- cursor stores -------------------------------------------------------------------------

/** Cursors in memory: for a host that follows a task within one process lifetime. */
export class MemoryCursorStore {
    #cursors = new Map();
    /** @param {string} taskId */
    load(taskId) {
        return this.#cursors.get(taskId);
    }
    /** @param {string} taskId @param {number} seq */
    save(taskId, seq) {
        this.#cursors.set(taskId, seq);
    }
    /** @param {string} taskId */
    delete(taskId) {
        this.#cursors.delete(taskId);
    }
}

/**
 * Cursors in a directory, one small JSON file per task (`{"taskId": ..., "seq": N}`, named by
 * the task id in hex), each replaced atomically and durably on save: written to a temporary
 * file, synced, renamed over the old one, the directory synced. The same files as the Rust
 * client's `FileCursorStore`.
 */
export class FileCursorStore {
    #dir;
    #sync;
    #counter = 0;
    /** @param {string} dir @param {{sync?: boolean}} [options] */
    constructor(dir, { sync = true } = {}) {
        this.#dir = dir;
        this.#sync = sync;
    }
    /** The file that holds the cursor of `taskId`. @param {string} taskId */
    pathOf(taskId) {
        if (typeof taskId !== 'string' || taskId.length === 0 || Buffer.byteLength(taskId) > 100) {
            throw new TypeError(`task id ${JSON.stringify(taskId)} cannot name a cursor file`);
        }
        return join(this.#dir, `${Buffer.from(taskId).toString('hex')}.cursor`);
    }
    /** @param {string} taskId */
    async load(taskId) {
        let text;
        try {
            text = await readFile(this.pathOf(taskId), 'utf8');
        } catch (e) {
            if (e?.code === 'ENOENT') return undefined;
            throw e;
        }
        const value = JSON.parse(text);
        if (value?.taskId !== taskId || !Number.isSafeInteger(value.seq) || value.seq < 0) {
            throw new Error(`cursor file ${this.pathOf(taskId)} is corrupt: ${text.slice(0, 100)}`);
        }
        return value.seq;
    }
    /** @param {string} taskId @param {number} seq */
    async save(taskId, seq) {
        const path = this.pathOf(taskId);
        await mkdir(this.#dir, { recursive: true });
        const temp = `${path}.tmp.${process.pid}.${this.#counter++}`;
        const file = await open(temp, 'wx');
        try {
            await file.writeFile(`${JSON.stringify({ taskId, seq })}\n`);
            if (this.#sync) await file.sync();
        } finally {
            await file.close();
        }
        try {
            await rename(temp, path);
        } catch (e) {
            await unlink(temp).catch(() => {});
            throw e;
        }
        if (this.#sync) {
            const dir = await open(this.#dir, 'r');
            try {
                await dir.sync();
            } finally {
                await dir.close();
            }
        }
    }
}

// --- routing notifications to streams ------------------------------------------------------

const routers = new WeakMap();

/**
 * The task events of one SDK client, routed to the follows reading them. Installed once per
 * client as its `fallbackNotificationHandler` (notifications no other handler takes), keeping
 * any fallback the host had set.
 */
function routerOf(client) {
    let router = routers.get(client);
    if (router) return router;
    const listeners = new Map();
    const followed = new Set(); // every task followed on this client so far
    const previous = client.fallbackNotificationHandler;
    client.fallbackNotificationHandler = async notification => {
        if (notification.method === TASK_EVENT_METHOD) {
            const params = notification.params ?? {};
            const listener = listeners.get(params.taskId);
            if (listener) {
                listener(params);
            } else if (!followed.has(params.taskId) && listeners.size === 1) {
                // An event naming a task never followed here, while exactly one stream is open:
                // it can only be that stream's, with a wrong taskId (NT-02).
                for (const other of listeners.values()) other(params);
            }
            // Otherwise (a cancelled stream's straggler, an unsolicited event) it is dropped.
            return;
        }
        await previous?.(notification);
    };
    const leftOpen = new Set();
    router = {
        /** A stream of the task was cancelled before its end: events it sent may still come. */
        leftOpen(taskId) {
            leftOpen.add(taskId);
        },
        /** Whether a stream of the task was left open since the last call. */
        takeLeftOpen(taskId) {
            return leftOpen.delete(taskId);
        },
        listen(taskId, fn) {
            if (listeners.has(taskId)) throw new Error(`task ${taskId} is already followed on this client`);
            followed.add(taskId);
            listeners.set(taskId, fn);
            return () => {
                if (listeners.get(taskId) === fn) listeners.delete(taskId);
            };
        },
    };
    routers.set(client, router);
    return router;
}

// --- tasks/get and tasks/cancel ------------------------------------------------------------

/**
 * The task's status and where its events stand, from `tasks/get`, without opening a stream:
 * `earliestSeq` (oldest retained), `latestSeq` (newest, `null` when none is retained) and
 * `nextSeq`, from taskstream's `_meta["dev.taskstream/events"]` (`undefined` from a server that
 * does not report them).
 * @param {import('@modelcontextprotocol/sdk/client/index.js').Client} client
 * @param {string} taskId
 */
export async function getEventRange(client, taskId, options = {}) {
    const task = await client.request({ method: 'tasks/get', params: { taskId } }, ANY_RESULT, options);
    const range = task._meta?.[EVENTS_META_KEY];
    return {
        status: task.status,
        terminal: TERMINAL_STATUSES.includes(task.status),
        earliestSeq: range?.earliestSeq,
        latestSeq: range?.latestSeq,
        nextSeq: range?.nextSeq,
        task,
    };
}

/**
 * Cancels the task itself (`tasks/cancel`): the task ends `cancelled`, and a stream following
 * it delivers that status event and ends. To stop reading without touching the task, cancel
 * the follow instead (`TaskFollow.cancel()` or its `signal`).
 */
export async function cancelTask(client, taskId, options = {}) {
    return client.request({ method: 'tasks/cancel', params: { taskId } }, ANY_RESULT, options);
}

// --- following a task ----------------------------------------------------------------------

/**
 * Follows one task's events: `for await (const event of followTask(...))`, or `.run(handler)`.
 * See index.d.ts for the options.
 */
export function followTask(options) {
    return new TaskFollow(options);
}

/** One follow of one task. Iterate it once (or call `run` once). */
export class TaskFollow {
    #o;
    #client;
    #cancel = new AbortController();
    #cursor; // last processed seq (committed), undefined before any
    #started = false;
    /** The lost ranges accepted under `onEventsGone: 'recover'`, both ends included. */
    gaps = [];
    /** Counters: events processed, duplicates dropped, streams opened, reconnects, the `after` of each stream. */
    stats = { events: 0, duplicates: 0, streams: 0, reopens: 0, reconnects: 0, goneRecoveries: 0, afters: [], checkpointStarts: [] };
    #pendingGap; // the gap recorded since the last event handed over
    /** How the follow ended, once it has: `{status, task, cursor, gaps, cancelled}`. */
    outcome = undefined;

    constructor(options) {
        if (!options?.client || typeof options.taskId !== 'string') throw new TypeError('followTask needs {client, taskId}');
        const onEventsGone = options.onEventsGone ?? 'fail';
        if (onEventsGone !== 'fail' && onEventsGone !== 'recover') throw new TypeError(`onEventsGone: 'fail' or 'recover', not ${onEventsGone}`);
        this.#o = {
            cursors: new MemoryCursorStore(),
            idleTimeoutMs: 30_000,
            maxReconnects: 8,
            maxGoneRecoveries: 4,
            requireRelatedTask: true,
            ...options,
            onEventsGone,
        };
        this.#client = options.client;
        options.signal?.addEventListener('abort', () => this.cancel(options.signal.reason), { once: true });
    }

    /** The task followed. */
    get taskId() {
        return this.#o.taskId;
    }
    /** The client the follow reads from now (a new one after a reconnect). */
    get client() {
        return this.#client;
    }
    /** The seq of the last event processed and committed, or undefined. */
    get cursor() {
        return this.#cursor;
    }

    /**
     * Stops following: cancels the open `tasks/stream` request (the SDK sends
     * `notifications/cancelled`); the task itself runs on. The iteration ends without error and
     * `outcome.cancelled` is true.
     */
    cancel(reason = 'follow cancelled') {
        if (!this.#cancel.signal.aborted) this.#cancel.abort(reason);
    }

    /**
     * Hands every event to `handler` (awaited) and commits its seq after it returned; resolves
     * with the outcome when the task is terminal and everything retained was processed.
     */
    async run(handler) {
        for await (const event of this) await handler(event);
        return this.outcome;
    }

    async *[Symbol.asyncIterator]() {
        if (this.#started) throw new Error('a TaskFollow is iterated once');
        this.#started = true;
        try {
            yield* this.#follow();
        } finally {
            // Left early (the host broke out of its loop or threw): the event it was handed
            // last is not committed, so a later follow delivers it again (a duplicate, never a loss).
            this.outcome ??= { status: undefined, task: undefined, cursor: this.#cursor, gaps: this.gaps, cancelled: true };
        }
    }

    async *#follow() {
        const o = this.#o;
        const taskId = o.taskId;
        const stored = await o.cursors.load(taskId);
        this.#cursor = stored;
        let after = o.after !== undefined ? o.after : stored;
        if (o.after !== undefined && stored !== undefined && o.after > stored) {
            this.#gap(stored + 1, o.after, 'started past the cursor');
        }
        if (o.after !== undefined && (stored === undefined || o.after > stored)) this.#cursor = o.after;
        let lostInARow = 0;
        let quietStreams = 0;
        let lastStreamDelivered = -1;
        while (!this.#cancel.signal.aborted) {
            const stream = this.#open(after);
            let delivered = 0;
            let ended; // {result} | {error}
            try {
                for (;;) {
                    const item = await stream.next();
                    if (item.event) {
                        const event = item.event;
                        const accepted = this.#check(event, stream);
                        if (!accepted) continue;
                        const checkpoint = checkpointOf(event);
                        if (checkpoint) event.checkpoint = checkpoint;
                        if (this.#pendingGap) {
                            // The first event after a gap: the host learns what it never saw,
                            // and whether a checkpoint's state covers it.
                            event.afterGap = this.#pendingGap;
                            this.#pendingGap = undefined;
                            if (checkpoint) {
                                event.fromCheckpoint = true;
                                this.stats.checkpointStarts.push(event.seq);
                            }
                        }
                        yield event;
                        // The host's handler returned (it asked for the next event): commit.
                        await o.cursors.save(taskId, event.seq);
                        this.#cursor = event.seq;
                        this.stats.events++;
                        delivered++;
                        lostInARow = 0;
                        if (this.#cancel.signal.aborted) break;
                        continue;
                    }
                    ended = item;
                    break;
                }
            } finally {
                stream.close();
            }
            if (this.#cancel.signal.aborted) break;
            after = this.#cursor;
            if (ended.error) {
                const gone = eventsGoneOf(ended.error, taskId, stream.after);
                if (gone) {
                    if (o.onEventsGone === 'fail' || this.stats.goneRecoveries >= o.maxGoneRecoveries) throw gone;
                    this.stats.goneRecoveries++;
                    const from = this.#cursor === undefined ? 0 : this.#cursor + 1;
                    if (gone.earliestSeq > from) {
                        this.#gap(from, gone.earliestSeq - 1, 'events_gone');
                        await o.cursors.save(taskId, gone.earliestSeq - 1);
                        this.#cursor = gone.earliestSeq - 1;
                    }
                    after = this.#cursor;
                    continue;
                }
                if (ended.error instanceof StreamViolationError) throw ended.error;
                if (ended.idle) {
                    // Quiet for idleTimeoutMs: maybe the task ended and the stream was never
                    // answered, maybe the task is just quiet. Look, then reopen or finish.
                    if (await this.#finished(delivered, lastStreamDelivered)) break;
                    lastStreamDelivered = delivered;
                    this.stats.reopens++;
                    continue;
                }
                if (!isConnectionLost(ended.error)) throw ended.error;
                // The connection is gone: the host makes a new one; resume from the cursor.
                if (!o.reconnect) throw new ConnectionLostError(`the connection following task ${taskId} was lost`, ended.error);
                if (++lostInARow > o.maxReconnects) {
                    throw new ConnectionLostError(`gave up on task ${taskId} after ${o.maxReconnects} reconnects without progress`, ended.error);
                }
                this.#client = await o.reconnect(this.#client, ended.error);
                this.stats.reconnects++;
                continue;
            }
            // The stream ended with its result: the task is terminal and everything was sent, or
            // the server closed it early (TS-04).
            if (await this.#finished(delivered, lastStreamDelivered)) break;
            lastStreamDelivered = delivered;
            this.stats.reopens++;
            if (delivered === 0) {
                quietStreams++;
                // A server that closes at once while the task runs: do not spin.
                await delay(Math.min(2000, 50 * 2 ** Math.min(quietStreams, 6)), this.#cancel.signal);
            } else {
                quietStreams = 0;
            }
        }
    }

    /** Whether the task is terminal with every retained event processed; sets the outcome. */
    async #finished(delivered, previousDelivered) {
        const range = await getEventRange(this.#client, this.#o.taskId);
        if (!range.terminal) return false;
        let done;
        if (range.latestSeq !== undefined) {
            done = range.latestSeq === null || (this.#cursor !== undefined && this.#cursor >= range.latestSeq);
        } else {
            // A server that does not report its range: done when a stream opened on the
            // terminal task delivered nothing new.
            done = delivered === 0 && previousDelivered >= 0;
        }
        if (done) this.outcome = { status: range.status, task: range.task, cursor: this.#cursor, gaps: this.gaps, cancelled: false };
        return done;
    }

    #gap(first, last, why) {
        const range = { first, last, why };
        this.gaps.push(range);
        this.#pendingGap = range;
        this.#o.onGap?.(range);
    }

    /**
     * Checks an event against the cursor: a duplicate is dropped (false), the next one is
     * accepted (true), anything else throws StreamViolationError.
     */
    #check(event, stream) {
        const o = this.#o;
        const taskId = o.taskId;
        const violation = msg => new StreamViolationError(`task ${taskId}: ${msg}`, { taskId, cursor: this.#cursor, event });
        if (event.taskId !== taskId) throw violation(`an event names task ${JSON.stringify(event.taskId)}`);
        if (o.requireRelatedTask && event._meta?.[RELATED_TASK_META_KEY]?.taskId !== taskId) {
            throw violation(`event seq ${event.seq} has no related-task _meta naming its task`);
        }
        if (!Number.isSafeInteger(event.seq) || event.seq < 0) throw violation(`event seq ${JSON.stringify(event.seq)} is not a seq`);
        if (this.#cursor !== undefined && event.seq <= this.#cursor) {
            this.stats.duplicates++;
            return false;
        }
        const want = this.#cursor === undefined ? 0 : this.#cursor + 1;
        if (event.seq !== want) {
            if (this.#cursor === undefined && stream.first && stream.after === undefined) {
                // No cursor: the stream starts at the earliest retained event, and retention
                // had dropped the ones before it.
                const gone = new EventsGoneError({ taskId, earliestSeq: event.seq, after: undefined });
                if (o.onEventsGone === 'fail') throw gone;
                this.#gap(0, event.seq - 1, 'earliest retained event');
                stream.first = false;
                return true;
            }
            throw violation(`event seq ${event.seq} follows ${this.#cursor === undefined ? 'no cursor' : `cursor ${this.#cursor}`}: expected ${want}`);
        }
        stream.first = false;
        return true;
    }

    /** Opens one `tasks/stream` request on the current client: a pull interface over it. */
    #open(after) {
        const client = this.#client;
        const taskId = this.#o.taskId;
        this.stats.streams++;
        this.stats.afters.push(after);
        const queue = [];
        let wake;
        let end; // {result} | {error} | {idle, error}
        const push = item => {
            queue.push(item);
            wake?.();
        };
        let unlisten;
        let answered = false; // the server ended the stream (a result or an error)
        const router = routerOf(client);
        // A stream of this task was cancelled on this client: the answer to a request (tasks/get,
        // valid in both eras, unlike ping) comes after every event that stream sent, which are
        // dropped as stragglers, before the new one is opened.
        const barrier = router.takeLeftOpen(taskId);
        let listening = !barrier;
        try {
            unlisten = router.listen(taskId, params => listening && push({ event: params }));
        } catch (e) {
            unlisten = () => {};
            end = { error: e };
        }
        const request = new AbortController();
        const onCancel = () => request.abort(this.#cancel.signal.reason);
        this.#cancel.signal.addEventListener('abort', onCancel, { once: true });
        const params = after === undefined ? { taskId } : { taskId, after };
        if (!end) {
            (barrier ? client.request({ method: 'tasks/get', params: { taskId } }, ANY_RESULT, { signal: request.signal }) : Promise.resolve())
                .then(() => {
                    listening = true;
                    return client.request({ method: 'tasks/stream', params }, ANY_RESULT, { signal: request.signal, timeout: NO_SDK_TIMEOUT });
                })
                .then(
                    result => { answered = true; end ??= { result }; wake?.(); },
                    error => { answered = !request.signal.aborted; end ??= { error }; wake?.(); }
                );
        }
        const idleMs = this.#o.idleTimeoutMs;
        const stream = {
            after,
            first: true,
            next: async () => {
                for (;;) {
                    if (this.#cancel.signal.aborted) return { error: new Error('cancelled') };
                    if (queue.length) return queue.shift();
                    if (end) return end;
                    let timer;
                    await new Promise(resolve => {
                        wake = resolve;
                        timer = setTimeout(() => {
                            if (!queue.length && !end) {
                                end = { idle: true, error: new Error(`no event for ${idleMs} ms`) };
                                request.abort('idle');
                            }
                            resolve();
                        }, idleMs);
                    });
                    clearTimeout(timer);
                    wake = undefined;
                }
            },
            close: () => {
                this.#cancel.signal.removeEventListener('abort', onCancel);
                unlisten();
                // A stream left before its result (a violation, the host stopped): cancel it.
                if (!answered) {
                    request.abort('follow left the stream');
                    router.leftOpen(taskId);
                }
                end ??= { error: new Error('closed') };
            },
        };
        return stream;
    }
}

function delay(ms, signal) {
    return new Promise(resolve => {
        const timer = setTimeout(done, ms);
        function done() {
            clearTimeout(timer);
            signal?.removeEventListener('abort', done);
            resolve();
        }
        signal?.addEventListener('abort', done, { once: true });
    });
}
