// Interop check: the official TypeScript MCP SDK (v1, 2025-11-25 era, SEP-1686 tasks) as a
// client of `taskstream serve`.
//
// It spawns the server with the SDK's StdioClientTransport, runs the initialize handshake, lists
// the tools, calls `emit` as a task through the SDK's experimental Tasks API, streams the task's
// events with a raw `tasks/stream` request (events collected by an SDK notification handler),
// fetches the result with `tasks/result`, and then exercises resume, the cursor checks, one
// stream per task, and cancelling a stream. Any violated property fails the run (exit 1, last
// line `error: ...`).
//
// Environment: TASKSTREAM_BIN (required) the server binary; TASKSTREAM_ARGS (optional) its
// arguments, default `serve --in-memory --durability none`.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CallToolResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod/v4';
import {
    RELATED, STATUS_TYPE, TICK_TYPE, CheckFailed, fail, assert, show, sleep, step,
    checkEnvelopes, checkEmitStream, dedupe, runCheck, serverCommand,
} from '../common/events.mjs';

const REQUEST_TIMEOUT = 20_000;

// Everything on the wire, in order, for ordering checks and for the failure report.
const wire = [];
// Every notifications/tasks/event the SDK handed to our handler, in delivery order.
const events = [];

/** The events of one task, in delivery order. */
const eventsOf = taskId => events.filter(e => e.taskId === taskId);

const PermissiveResult = z.looseObject({});

/** A legacy-session TaskStreamResult is the empty result (`_meta` allowed). */
function checkEmptyResult(result, what) {
    const keys = Object.keys(result ?? {}).filter(k => k !== '_meta');
    assert(keys.length === 0, `${what}: result ${show(result)}, expected the empty result {}`);
}

async function expectError(promise, code, what) {
    try {
        const r = await promise;
        fail(`${what}: expected error ${code}, got result ${show(r)}`);
    } catch (e) {
        if (e instanceof CheckFailed) throw e;
        assert(e instanceof McpError, `${what}: expected McpError ${code}, got ${e}`);
        assert(e.code === code, `${what}: error code ${e.code} (${e.message}), expected ${code}`);
        return e;
    }
}

async function main() {
    const { bin, args } = serverCommand();
    const transport = new StdioClientTransport({ command: bin, args, stderr: 'pipe' });
    let stderr = '';
    transport.stderr?.on('data', d => {
        stderr += d.toString();
        if (stderr.length > 20000) stderr = stderr.slice(-20000);
    });
    // Tap the wire: Protocol.connect keeps a pre-set onmessage and calls it first.
    transport.onmessage = msg => wire.push({ dir: '<-', msg });
    const send = transport.send.bind(transport);
    transport.send = (msg, opts) => {
        wire.push({ dir: '->', msg });
        return send(msg, opts);
    };

    const client = new Client({ name: 'taskstream-interop-ts', version: '1.0.0' }, { capabilities: {} });
    client.onerror = err => console.log(`  (sdk onerror: ${err.message})`);
    client.setNotificationHandler(
        z.object({ method: z.literal('notifications/tasks/event'), params: z.looseObject({}) }),
        n => {
            events.push(n.params);
        }
    );

    try {
        // 1. initialize
        await client.connect(transport, { timeout: REQUEST_TIMEOUT });
        const init = wire.find(w => w.dir === '<-' && w.msg.id !== undefined && w.msg.result?.protocolVersion);
        assert(init, 'no initialize result seen');
        const caps = client.getServerCapabilities();
        step(`initialize: protocolVersion ${init.msg.result.protocolVersion}, server ${show(client.getServerVersion())}`);
        assert(caps?.tools, `server capabilities lack tools: ${show(caps)}`);
        assert(caps?.tasks?.requests?.tools?.call, `server capabilities lack tasks.requests.tools.call (SEP-1686): ${show(caps)}`);
        assert(caps?.tasks?.eventStreams, `server capabilities lack tasks.eventStreams: ${show(caps)}`);
        step(`capabilities: tasks ${show(caps.tasks)}`);

        // 2. tools/list
        const { tools } = await client.listTools(undefined, { timeout: REQUEST_TIMEOUT });
        const names = tools.map(t => t.name);
        assert(names.includes('emit') && names.includes('run_trace'), `tools/list gave ${show(names)}, expected emit and run_trace`);
        const emitTool = tools.find(t => t.name === 'emit');
        assert(emitTool.execution?.taskSupport === 'optional',
            `emit: execution.taskSupport is ${show(emitTool.execution?.taskSupport)}, expected "optional" (callable plainly or as a task)`);
        step(`tools/list: ${show(names)}`);

        // 3. emit as a task via the SDK's Tasks API; open tasks/stream as soon as the task exists.
        const n = 12;
        const payloadBytes = 24;
        let taskId;
        let streamPromise;
        let eventsAtStreamEnd = -1;
        const statuses = [];
        let callResult;
        for await (const message of client.experimental.tasks.callToolStream(
            { name: 'emit', arguments: { count: n, interval_ms: 40, payload_bytes: payloadBytes } },
            CallToolResultSchema,
            { task: { ttl: 60_000 }, timeout: REQUEST_TIMEOUT }
        )) {
            if (message.type === 'taskCreated') {
                taskId = message.task.taskId;
                assert(typeof taskId === 'string' && taskId.length > 0, `bad taskId ${show(taskId)}`);
                step(`tools/call emit {count:${n}} as a task: taskId ${taskId}, status ${message.task.status}`);
                streamPromise = client
                    .request({ method: 'tasks/stream', params: { taskId } }, PermissiveResult, { timeout: REQUEST_TIMEOUT })
                    .then(r => {
                        eventsAtStreamEnd = eventsOf(taskId).length;
                        return r;
                    });
            } else if (message.type === 'taskStatus') {
                statuses.push(message.task.status);
            } else if (message.type === 'result') {
                callResult = message.result;
            } else if (message.type === 'error') {
                fail(`callToolStream yielded an error: ${message.error?.message ?? message.error}`);
            }
        }
        assert(taskId, 'callToolStream never yielded taskCreated');
        assert(callResult, 'callToolStream ended without a result');
        step(`polled tasks/get statuses ${show(statuses)}; result via tasks/result: ${show(callResult.content)}`);
        const streamResult = await streamPromise;
        checkEmptyResult(streamResult, 'tasks/stream');
        const evs = eventsOf(taskId);
        checkEmitStream(evs, taskId, { ticks: n, payloadBytes, terminal: 'completed' });
        assert(eventsAtStreamEnd === n + 2,
            `tasks/stream answered after ${eventsAtStreamEnd} of ${n + 2} events: the result must follow the last event`);
        step(`tasks/stream: ${evs.length} events, seq 0..${n + 1} gap-free, related-task _meta on each, result {}`);

        // Wire-level: the stream's response comes after its last event.
        const out = wire.find(w => w.dir === '->' && w.msg.method === 'tasks/stream' && w.msg.params?.taskId === taskId);
        const respIdx = wire.findIndex(w => w.dir === '<-' && w.msg.id === out.msg.id && ('result' in w.msg || 'error' in w.msg));
        const lastEvIdx = wire.findLastIndex(w => w.dir === '<-' && w.msg.method === 'notifications/tasks/event' && w.msg.params?.taskId === taskId);
        assert(respIdx > lastEvIdx, 'on the wire, the tasks/stream response came before the last event notification');

        // 4. tasks/result (explicitly) and tasks/get agree with the terminal event.
        const result = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema, { timeout: REQUEST_TIMEOUT });
        assert(Array.isArray(result.content) && result.content.length > 0 && result.content[0].type === 'text',
            `tasks/result: content ${show(result.content)}, expected a text block`);
        assert(!result.isError, `tasks/result: isError is set: ${show(result)}`);
        assert(result._meta?.[RELATED]?.taskId === taskId,
            `tasks/result: _meta["${RELATED}"] is ${show(result._meta?.[RELATED])}, expected {"taskId":${show(taskId)}} (2025-11-25: tasks/result MUST include it)`);
        const got = await client.experimental.tasks.getTask(taskId, { timeout: REQUEST_TIMEOUT });
        assert(got.status === 'completed', `tasks/get: status ${got.status}, expected completed`);
        step(`tasks/result: ${show(result.content[0].text)} with related-task _meta; tasks/get: completed`);

        // 5. Resume after a cursor on the terminal task: exactly the later events, same content.
        const k = 4;
        let before = events.length;
        const resumed = await client.request({ method: 'tasks/stream', params: { taskId, after: k } }, PermissiveResult, { timeout: REQUEST_TIMEOUT });
        checkEmptyResult(resumed, 'tasks/stream after');
        const replay = events.slice(before);
        checkEnvelopes(replay, taskId, k + 1);
        assert(replay.length === n + 2 - (k + 1), `tasks/stream {after:${k}}: ${replay.length} events, expected ${n + 2 - (k + 1)}`);
        replay.forEach(e => assert(show(e) === show(evs[e.seq]), `replayed event seq ${e.seq} differs from the first delivery: ${show(e)} vs ${show(evs[e.seq])}`));
        step(`tasks/stream {after:${k}}: seq ${k + 1}..${n + 1}, identical to the first delivery`);

        // 6. Cursor at the last event of a terminal task: immediate empty result, no events.
        before = events.length;
        const atEnd = await client.request({ method: 'tasks/stream', params: { taskId, after: n + 1 } }, PermissiveResult, { timeout: REQUEST_TIMEOUT });
        checkEmptyResult(atEnd, 'tasks/stream at end');
        await sleep(100);
        assert(events.length === before, `tasks/stream {after:${n + 1}} on a terminal task sent ${events.length - before} events, expected none`);
        step(`tasks/stream {after:${n + 1}}: immediate {} and no events`);

        // 7. Invalid cursors and unknown tasks are -32602.
        for (const bad of [-1, 1.5, n + 2, '3']) {
            await expectError(client.request({ method: 'tasks/stream', params: { taskId, after: bad } }, PermissiveResult, { timeout: REQUEST_TIMEOUT }),
                -32602, `tasks/stream {after:${show(bad)}}`);
        }
        await expectError(client.request({ method: 'tasks/stream', params: { taskId: 'no-such-task' } }, PermissiveResult, { timeout: REQUEST_TIMEOUT }),
            -32602, 'tasks/stream on an unknown task');
        step('tasks/stream with after -1, 1.5, past the end, "3", and an unknown taskId: -32602 each');

        // 8. A failing task: the stream ends with a failed status event, consistent with tasks/get.
        const failing = await client.request(
            { method: 'tools/call', params: { name: 'emit', arguments: { count: 6, fail_at: 2 }, task: { ttl: 60_000 } } },
            z.looseObject({ task: z.looseObject({ taskId: z.string() }) }), { timeout: REQUEST_TIMEOUT });
        const failId = failing.task.taskId;
        checkEmptyResult(await client.request({ method: 'tasks/stream', params: { taskId: failId } }, PermissiveResult, { timeout: REQUEST_TIMEOUT }), 'tasks/stream (failing task)');
        const fevs = eventsOf(failId);
        assert(fevs.length >= 2, `failing task: ${fevs.length} events`);
        checkEnvelopes(fevs, failId, 0);
        const flast = fevs[fevs.length - 1];
        assert(flast.type === STATUS_TYPE && flast.payload.status === 'failed', `failing task: last event ${show(flast)}, expected status failed`);
        const ticks = fevs.filter(e => e.type === TICK_TYPE).map(e => e.payload.i);
        assert(ticks.length <= 6 && ticks.every((v, i) => v === i) && ticks.includes(2),
            `failing task (fail_at 2): tick indices ${show(ticks)}`);
        const fget = await client.experimental.tasks.getTask(failId, { timeout: REQUEST_TIMEOUT });
        assert(fget.status === 'failed', `failing task: tasks/get status ${fget.status}, expected failed`);
        step(`emit {fail_at:2} as a task: ${fevs.length} events ending in status failed; tasks/get: failed`);

        // 9. Every bundled trace (the names run_trace's schema offers), replayed fast as a task:
        // a gap-free stream of vendor-prefixed events that ends in the status tasks/get reports.
        const traceTool = tools.find(t => t.name === 'run_trace');
        const traces = traceTool.inputSchema?.properties?.name?.enum ?? [];
        assert(traces.length > 0, `run_trace: inputSchema.properties.name has no enum of trace names: ${show(traceTool.inputSchema)}`);
        const summary = [];
        for (const name of traces) {
            const created = await client.request(
                { method: 'tools/call', params: { name: 'run_trace', arguments: { name, speed: 100_000 }, task: { ttl: 60_000 } } },
                z.looseObject({ task: z.looseObject({ taskId: z.string() }) }), { timeout: REQUEST_TIMEOUT });
            const id = created.task.taskId;
            checkEmptyResult(await client.request({ method: 'tasks/stream', params: { taskId: id } }, PermissiveResult, { timeout: REQUEST_TIMEOUT }), `tasks/stream (trace ${name})`);
            const tevs = eventsOf(id);
            assert(tevs.length >= 3, `trace ${name}: ${tevs.length} events`);
            checkEnvelopes(tevs, id, 0);
            assert(tevs[0].type === STATUS_TYPE && tevs[0].payload.status === 'working', `trace ${name}: first event ${show(tevs[0])}`);
            const tlast = tevs[tevs.length - 1];
            const tget = await client.experimental.tasks.getTask(id, { timeout: REQUEST_TIMEOUT });
            assert(['completed', 'failed', 'cancelled'].includes(tget.status), `trace ${name}: tasks/get status ${tget.status} after the stream ended`);
            assert(tlast.type === STATUS_TYPE && tlast.payload.status === tget.status,
                `trace ${name}: last event ${show(tlast)}, but tasks/get says ${tget.status}`);
            const kinds = new Set(tevs.map(e => e.type).filter(t => t !== STATUS_TYPE));
            assert(kinds.size >= 3, `trace ${name}: only event types ${show([...kinds])}`);
            summary.push(`${name}: ${tevs.length} events, ${kinds.size} types, ${tget.status}`);
        }
        step(`run_trace as a task, every bundled trace: ${summary.join('; ')}`);

        // 10. One active stream per task; cancelling a stream keeps the task running; resume is gap-free.
        const m = 40;
        const long = await client.request(
            { method: 'tools/call', params: { name: 'emit', arguments: { count: m, interval_ms: 50 }, task: { ttl: 60_000 } } },
            z.looseObject({ task: z.looseObject({ taskId: z.string() }) }), { timeout: REQUEST_TIMEOUT });
        const longId = long.task.taskId;
        const abort = new AbortController();
        const first = client.request({ method: 'tasks/stream', params: { taskId: longId } }, PermissiveResult, { signal: abort.signal, timeout: REQUEST_TIMEOUT });
        first.catch(() => {});
        for (let t = 0; eventsOf(longId).length < 4; t++) {
            assert(t < 200, `first stream of task ${longId}: only ${eventsOf(longId).length} events after 10 s`);
            await sleep(50);
        }
        const dup = await expectError(client.request({ method: 'tasks/stream', params: { taskId: longId } }, PermissiveResult, { timeout: REQUEST_TIMEOUT }),
            -32602, 'second concurrent tasks/stream for one task');
        assert(dup.data?.reason === 'stream_active', `second concurrent tasks/stream: data ${show(dup.data)}, expected {"reason":"stream_active"}`);
        abort.abort('switching cursor');
        const seen = eventsOf(longId);
        const lastSeq = seen[seen.length - 1].seq;
        const statusAfterCancel = (await client.experimental.tasks.getTask(longId, { timeout: REQUEST_TIMEOUT })).status;
        assert(statusAfterCancel === 'working' || statusAfterCancel === 'completed',
            `after cancelling the stream the task is ${statusAfterCancel}: cancelling a stream must not cancel the task`);
        const reopened = await client.request({ method: 'tasks/stream', params: { taskId: longId, after: lastSeq } }, PermissiveResult, { timeout: REQUEST_TIMEOUT });
        checkEmptyResult(reopened, 'tasks/stream (reopened)');
        // Stragglers of the cancelled stream may arrive late; de-duplicate by seq (identical content).
        const merged = dedupe(eventsOf(longId));
        checkEmitStream(merged, longId, { ticks: m, terminal: 'completed' });
        const firstIds = wire.filter(w => w.dir === '->' && w.msg.method === 'tasks/stream' && w.msg.params?.taskId === longId && w.msg.params.after === undefined).map(w => w.msg.id);
        const answered = wire.some(w => w.dir === '<-' && firstIds[0] !== undefined && w.msg.id === firstIds[0]);
        step(`second stream: -32602 stream_active; cancelled stream at seq ${lastSeq}, task still ${statusAfterCancel}; reopened with after: gap-free to seq ${m + 1}`
            + (answered ? ' (note: the cancelled request was still answered)' : ''));

        // 11. A plain (non-task) call still works.
        const plain = await client.callTool({ name: 'emit', arguments: { count: 3 } }, CallToolResultSchema, { timeout: REQUEST_TIMEOUT });
        assert(!plain.task && Array.isArray(plain.content) && plain.content[0]?.type === 'text' && !plain.isError,
            `plain tools/call emit: ${show(plain)}`);
        step(`plain tools/call emit {count:3}: ${show(plain.content[0].text)}`);
    } catch (e) {
        console.log('  --- last wire messages:');
        for (const w of wire.slice(-12)) console.log(`  ${w.dir} ${show(w.msg).slice(0, 400)}`);
        if (stderr) console.log(`  --- server stderr (tail):\n${stderr.slice(-2000)}`);
        throw e;
    } finally {
        await client.close().catch(() => {});
    }
}

await runCheck(main);
