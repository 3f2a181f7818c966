// Interop check: the TypeScript MCP SDK v2 client (`@modelcontextprotocol/client`) in the modern
// era (2026-07-28, stateless), with Tasks through the official SEP-2663 client package
// `@modelcontextprotocol/ext-tasks`, against `taskstream serve`.
//
// The client negotiates the era itself (`versionNegotiation: 'auto'`: a `server/discover` probe,
// falling back to `initialize` only on a legacy verdict) and must land on 2026-07-28. ext-tasks
// runs `emit` as a task (`tools/call` answered by a flat CreateTaskResult, then `tasks/get` until
// the result is inline); meanwhile a raw `tasks/stream` through the SDK (which attaches the
// per-request `_meta` envelope) collects the events. The SDK's own wire codec refuses the
// `resultType: "task"` answer, so, as ext-tasks documents, the host supplies `rawDispatch` for
// task traffic: here a small coordinator on the same stdio transport. Any violated property
// fails the run (exit 1, last line `error: ...`).
//
// With `--http` the same steps run over Streamable HTTP against `taskstream serve --http`
// (the SDK's `StreamableHTTPClientTransport`: every POST its own connection, `Mcp-Method` /
// `Mcp-Name` headers checked by the server, `tasks/stream` answered as `text/event-stream`).
//
// Environment: TASKSTREAM_BIN (required) the server binary; TASKSTREAM_ARGS (optional) its
// arguments, default `serve --in-memory --durability none`.

import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { startHttpServer } from '../common/http.mjs';
import { createTaskSessionFromClient, resultFromTaskOutcome } from '@modelcontextprotocol/ext-tasks/client';
import * as z from 'zod';
import {
    STATUS_TYPE, fail, assert, show, step, checkEnvelopes, checkEmitStream, runCheck, serverCommand,
} from '../common/events.mjs';

const MODERN = '2026-07-28';
const TASKS_EXT = 'io.modelcontextprotocol/tasks';
const REQUEST_TIMEOUT = 20_000;
const clientInfo = { name: 'taskstream-interop-ts-v2', version: '1.0.0' };
const clientCapabilities = { extensions: { [TASKS_EXT]: {} } };

const wire = [];
const events = [];
const eventsOf = taskId => events.filter(e => e.taskId === taskId);
const Permissive = z.looseObject({});
// Failures noted while carrying on, reported at the end.
const deferred = [];

/** The transport to the server under test: a stdio child, or (`--http`) a `serve --http`. */
async function openTransport() {
    if (process.argv.includes('--http')) {
        const server = await startHttpServer();
        const transport = new StreamableHTTPClientTransport(new URL(server.url));
        return { transport, stderr: server.stderr, stop: server.stop };
    }
    const { bin, args } = serverCommand();
    const transport = new StdioClientTransport({ command: bin, args, stderr: 'pipe' });
    let stderr = '';
    transport.stderr?.on('data', d => {
        stderr = (stderr + d.toString()).slice(-20000);
    });
    return { transport, stderr: () => stderr, stop: () => {} };
}

async function main() {
    const { transport, stderr, stop } = await openTransport();

    // The host-owned raw request path ext-tasks asks for: string ids of our own, answered
    // through the wire tap (the SDK, which also sees those answers, only reports them to onerror).
    const pendingRaw = new Map();
    let rawSeq = 0;
    transport.onmessage = msg => {
        wire.push({ dir: '<-', msg });
        if (typeof msg.id === 'string' && pendingRaw.has(msg.id) && ('result' in msg || 'error' in msg)) {
            const resolve = pendingRaw.get(msg.id);
            pendingRaw.delete(msg.id);
            resolve('error' in msg ? { kind: 'error', error: msg.error } : { kind: 'result', result: msg.result });
        }
    };
    const send = transport.send.bind(transport);
    transport.send = (msg, opts) => {
        wire.push({ dir: '->', msg });
        return send(msg, opts);
    };
    const rawRequest = (request, { signal } = {}) =>
        new Promise((resolve, reject) => {
            const id = `raw-${++rawSeq}`;
            const timer = setTimeout(() => {
                pendingRaw.delete(id);
                reject(new Error(`raw ${request.method}: no answer in ${REQUEST_TIMEOUT} ms`));
            }, REQUEST_TIMEOUT);
            pendingRaw.set(id, r => {
                clearTimeout(timer);
                resolve(request.method === 'tasks/get' ? checkInlineResult(r) : r);
            });
            signal?.addEventListener('abort', () => {
                clearTimeout(timer);
                pendingRaw.delete(id);
                reject(signal.reason);
            });
            transport.send({ jsonrpc: '2.0', id, ...request }).catch(reject);
        });
    // 2026-07-28: every result carries resultType, and a completed task's inline `result` is the
    // CallToolResult the request would have answered; ext-tasks decodes it as such. Note a
    // missing resultType, then fill it in so that the rest is still checked.
    const checkInlineResult = r => {
        const inner = r.kind === 'result' ? r.result?.result : undefined;
        if (inner && typeof inner === 'object' && !('resultType' in inner)) {
            const msg = 'tasks/get of a completed task: the inline result lacks resultType '
                + `(${show(inner).slice(0, 120)}); ext-tasks rejects it ("Protocol value failed schema validation")`;
            if (!deferred.includes(msg)) {
                deferred.push(msg);
                console.log(`  FAIL ${msg} (continuing with resultType "complete")`);
            }
            return { kind: 'result', result: { ...r.result, result: { resultType: 'complete', ...inner } } };
        }
        return r;
    };
    const meta = (caps = clientCapabilities) => ({
        'io.modelcontextprotocol/protocolVersion': MODERN,
        'io.modelcontextprotocol/clientInfo': clientInfo,
        'io.modelcontextprotocol/clientCapabilities': caps,
    });

    const client = new Client(clientInfo, { capabilities: clientCapabilities, versionNegotiation: { mode: 'auto' } });
    client.onerror = err => {
        if (!/unknown message ID: .*"raw-/.test(err.message)) console.log(`  (sdk onerror: ${err.message})`);
    };
    client.setNotificationHandler('notifications/tasks/event', { params: z.looseObject({}) }, (_params, notification) => {
        // The raw params: the SDK lifts only its own envelope keys out of `_meta`.
        events.push(notification.params);
    });

    let session;
    try {
        // 1. era negotiation and capabilities
        await client.connect(transport, { timeout: REQUEST_TIMEOUT });
        const era = client.getProtocolEra();
        const version = client.getNegotiatedProtocolVersion();
        assert(era === 'modern' && version === MODERN, `negotiated ${era} ${version}, expected modern ${MODERN}`);
        const caps = client.getServerCapabilities();
        const tasksExt = caps?.extensions?.[TASKS_EXT];
        assert(tasksExt !== null && typeof tasksExt === 'object', `server capabilities lack extensions["${TASKS_EXT}"]: ${show(caps)}`);
        step(`server/discover probe: modern era ${version}; capabilities ${show(caps)}`);
        // SEP-2663: "No extension-specific settings are currently defined; an empty object
        // indicates support." ext-tasks takes only an empty object as support (with anything
        // inside it treats the server as having no Tasks at all), so taskstream advertises the
        // Tasks extension as {} and event streams beside it, as their own extension key (open
        // question A-06 in docs/specification/tasks-stream.md). Nothing is patched: the
        // unpatched client must recognise the Tasks extension as it is sent.
        assert(show(tasksExt) === show({}), `extensions["${TASKS_EXT}"] is ${show(tasksExt)}; ext-tasks recognises only {}`);
        const streamsExt = caps?.extensions?.['dev.taskstream/event-streams'];
        assert(streamsExt !== null && typeof streamsExt === 'object', `server capabilities lack extensions["dev.taskstream/event-streams"]: ${show(caps)}`);
        step(`capabilities: extensions["${TASKS_EXT}"] = {} (accepted by ext-tasks unpatched), event streams as extensions["dev.taskstream/event-streams"]`);

        // 2. tools/list (the SDK attaches the per-request _meta envelope)
        const { tools } = await client.listTools();
        const names = tools.map(t => t.name);
        assert(names.includes('emit') && names.includes('run_trace'), `tools/list gave ${show(names)}, expected emit and run_trace`);
        step(`tools/list: ${show(names)}`);

        // 3. emit as a task through ext-tasks, streamed with tasks/stream while it runs
        session = createTaskSessionFromClient(client, {
            endpointId: 'taskstream-interop',
            rawDispatch: rawRequest,
            v2RequestFraming: { protocolVersion: MODERN, clientInfo, clientCapabilities },
        });
        const n = 15;
        const execution = await session.callTool('emit', { count: n, interval_ms: 30, payload_bytes: 8 }, { task: { preference: 'require' } });
        assert(execution.kind === 'task', `ext-tasks callTool: execution kind ${execution.kind}, expected task`);
        const taskId = execution.handle.taskId;
        const created = wire.find(w => w.dir === '<-' && w.msg.result?.resultType === 'task');
        assert(created?.msg.result.taskId === taskId, `no flat CreateTaskResult (resultType "task") for ${taskId} on the wire`);
        step(`tools/call emit {count:${n}} with the Tasks extension declared: CreateTaskResult, taskId ${taskId}`);
        let eventsAtEnd = -1;
        const streamed = client.request({ method: 'tasks/stream', params: { taskId } }, Permissive, { timeout: REQUEST_TIMEOUT })
            .then(r => {
                eventsAtEnd = eventsOf(taskId).length;
                return r;
            });
        const statuses = [];
        const { outcome } = await execution.settle({ onEvent: e => e.type === 'task' && statuses.push(e.task.status) });
        assert(outcome.status === 'completed', `ext-tasks outcome ${outcome.status}: ${outcome.error?.message ?? ''}`);
        const result = resultFromTaskOutcome(outcome);
        assert(Array.isArray(result.content) && result.content[0]?.type === 'text', `task result ${show(result)}, expected a text block`);
        step(`ext-tasks settle (tasks/get until inline result): statuses ${show(statuses)}, result ${show(result.content[0].text)}`);

        await streamed;
        const out = wire.find(w => w.dir === '->' && w.msg.method === 'tasks/stream' && w.msg.params?.taskId === taskId);
        assert(out.msg.params._meta?.['io.modelcontextprotocol/protocolVersion'] === MODERN, `tasks/stream went out without the modern _meta envelope: ${show(out.msg)}`);
        const resp = wire.find(w => w.dir === '<-' && w.msg.id === out.msg.id && ('result' in w.msg || 'error' in w.msg));
        const { _meta: _m, ...rest } = resp.msg.result ?? {};
        assert(show(rest) === show({ resultType: 'complete' }), `tasks/stream result ${show(resp.msg)}, expected {"resultType":"complete"} in a modern request`);
        const evs = eventsOf(taskId);
        checkEmitStream(evs, taskId, { ticks: n, payloadBytes: 8, terminal: 'completed' });
        assert(eventsAtEnd === n + 2, `tasks/stream answered after ${eventsAtEnd} of ${n + 2} events`);
        step(`tasks/stream: ${evs.length} events, seq 0..${n + 1} gap-free, related-task _meta on each, result {"resultType":"complete"}`);

        // 4. tasks/get on the terminal task: status and inline result agree with the last event
        const got = await rawRequest({ method: 'tasks/get', params: { taskId, _meta: meta() } });
        assert(got.kind === 'result', `tasks/get: ${show(got)}`);
        assert(got.result.resultType === 'complete' && got.result.status === 'completed' && got.result.result?.content?.[0]?.type === 'text',
            `tasks/get: ${show(got.result)}, expected resultType complete, status completed and the result inline`);
        assert(evs[evs.length - 1].payload.status === got.result.status, 'terminal event disagrees with tasks/get');
        step('tasks/get: completed with the result inline, consistent with the terminal event');

        // 5. resume on the terminal task, and the cursor rules, in modern requests
        const before = events.length;
        await client.request({ method: 'tasks/stream', params: { taskId, after: 9 } }, Permissive, { timeout: REQUEST_TIMEOUT });
        const replay = events.slice(before);
        checkEnvelopes(replay, taskId, 10);
        assert(replay.length === n + 2 - 10, `tasks/stream {after:9}: ${replay.length} events, expected ${n + 2 - 10}`);
        replay.forEach(e => assert(show(e) === show(evs[e.seq]), `replayed seq ${e.seq} differs from the first delivery`));
        for (const bad of [-1, 0.5, n + 2]) {
            const r = await rawRequest({ method: 'tasks/stream', params: { taskId, after: bad, _meta: meta() } });
            assert(r.kind === 'error' && r.error.code === -32602, `tasks/stream {after:${bad}}: ${show(r)}, expected -32602`);
        }
        step(`tasks/stream {after:9}: seq 10..${n + 1} identical; after -1, 0.5, past the end: -32602`);

        // 6. Without the Tasks extension declared: tasks/stream is -32021 (the extension's rule
        // for tasks/* requests); tools/call of emit runs plainly and answers resultType complete.
        const noExt = await rawRequest({ method: 'tasks/stream', params: { taskId, _meta: meta({}) } });
        assert(noExt.kind === 'error' && noExt.error.code === -32021,
            `tasks/stream without the Tasks extension declared: ${show(noExt)}, expected -32021`);
        const plain = await rawRequest({ method: 'tools/call', params: { name: 'emit', arguments: { count: 2 }, _meta: meta({}) } });
        assert(plain.kind === 'result' && plain.result.resultType === 'complete' && plain.result.content?.[0]?.type === 'text',
            `tools/call emit without the Tasks extension: ${show(plain)}, expected a plain result`);
        step('without the Tasks extension declared: tasks/stream -32021, tools/call emit plain (resultType complete)');
    } catch (e) {
        console.log('  --- last wire messages:');
        for (const w of wire.slice(-12)) console.log(`  ${w.dir} ${show(w.msg).slice(0, 400)}`);
        if (stderr()) console.log(`  --- server stderr (tail):\n${stderr().slice(-2000)}`);
        throw e;
    } finally {
        await session?.close().catch(() => {});
        await client.close().catch(() => {});
        stop();
    }
    assert(deferred.length === 0, deferred.join('; '));
}

await runCheck(main);
