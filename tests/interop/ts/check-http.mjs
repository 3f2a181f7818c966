// Interop check: the official TypeScript MCP SDK v1 `StreamableHTTPClientTransport` (2025-11-25
// era, sessions) against `taskstream serve --http`, including the SDK's own resumption of a
// dropped SSE stream: a proxy cuts the `tasks/stream` response mid-way, the SDK reconnects with
// `GET` + `Last-Event-ID`, and the events must go on with no gap and no duplicate, ending with
// the stream's response. Last line `ok`, or `error: ...`.
//
// Environment: TASKSTREAM_BIN (required), TASKSTREAM_ARGS (optional; `--http` is added).

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import * as z from 'zod/v4';
import { assert, show, step, checkEmitStream, runCheck } from '../common/events.mjs';
import { startHttpServer, startCuttingProxy } from '../common/http.mjs';

const TIMEOUT = 20_000;
const Permissive = z.looseObject({});

async function main() {
    let serverPort = 0;
    // Cut the first tasks/stream response after its event seq 3.
    const proxy = await startCuttingProxy(() => serverPort, (req, resp) =>
        req.includes('"tasks/stream"') && !req.startsWith('GET') && resp.includes('"seq":3,'));
    const server = await startHttpServer(['--allowed-origin', `http://127.0.0.1:${proxy.port}`]);
    serverPort = server.port;
    const events = [];
    const client = new Client({ name: 'taskstream-interop-ts-http', version: '1.0.0' }, { capabilities: {} });
    client.onerror = () => {};
    client.setNotificationHandler(
        z.object({ method: z.literal('notifications/tasks/event'), params: z.looseObject({}) }),
        n => events.push(n.params));
    const transport = new StreamableHTTPClientTransport(new URL(proxy.url), {
        reconnectionOptions: { initialReconnectionDelay: 100, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1.5, maxRetries: 5 },
    });
    try {
        await client.connect(transport, { timeout: TIMEOUT });
        assert(transport.sessionId, 'no Mcp-Session-Id from initialize');
        const caps = client.getServerCapabilities();
        assert(caps?.tasks?.eventStreams, `capabilities lack tasks.eventStreams: ${show(caps)}`);
        step(`initialize over HTTP: session ${transport.sessionId}`);
        const { tools } = await client.listTools(undefined, { timeout: TIMEOUT });
        assert(tools.some(t => t.name === 'emit'), `tools/list: ${show(tools.map(t => t.name))}`);

        const n = 20;
        const created = await client.request(
            { method: 'tools/call', params: { name: 'emit', arguments: { count: n, interval_ms: 30 }, task: { ttl: 60_000 } } },
            Permissive, { timeout: TIMEOUT });
        const taskId = created.task?.taskId;
        assert(typeof taskId === 'string', `tools/call as a task: ${show(created)}`);
        step(`emit {count:${n}} as a task: ${taskId}`);

        const tokens = [];
        const result = await client.request({ method: 'tasks/stream', params: { taskId } }, Permissive,
            { timeout: TIMEOUT, onresumptiontoken: t => tokens.push(t) });
        const keys = Object.keys(result).filter(k => k !== '_meta');
        assert(keys.length === 0, `tasks/stream result ${show(result)}, expected {}`);
        assert(proxy.cuts() === 1, `the proxy cut ${proxy.cuts()} responses, expected 1`);
        const evs = events.filter(e => e.taskId === taskId);
        checkEmitStream(evs, taskId, { ticks: n, terminal: 'completed' });
        step(`stream cut after seq 3, resumed by the SDK with Last-Event-ID (tokens ${show(tokens.slice(0, 6))}…): ` +
            `${evs.length} events, seq 0..${n + 1} gap-free, no duplicate, result {}`);

        // A late joiner on a new session replays the whole task.
        const late = new Client({ name: 'late', version: '1' }, { capabilities: {} });
        const lateEvents = [];
        late.setNotificationHandler(
            z.object({ method: z.literal('notifications/tasks/event'), params: z.looseObject({}) }),
            e => lateEvents.push(e.params));
        await late.connect(new StreamableHTTPClientTransport(new URL(server.url)), { timeout: TIMEOUT });
        await late.request({ method: 'tasks/stream', params: { taskId } }, Permissive, { timeout: TIMEOUT });
        checkEmitStream(lateEvents, taskId, { ticks: n, terminal: 'completed' });
        step(`late joiner on another session: ${lateEvents.length} events replayed`);
        await late.close();
    } finally {
        await client.close().catch(() => {});
        proxy.close();
        server.stop();
    }
}

runCheck(main);
