// Test helpers: servers to follow tasks on (taskstream serve / connect / conformance-server,
// over stdio or Streamable HTTP), SDK clients connected to them, tasks started on them.

import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as ClientV2, StreamableHTTPClientTransport as HttpTransportV2 } from '@modelcontextprotocol/client';
import { StdioClientTransport as StdioTransportV2 } from '@modelcontextprotocol/client/stdio';

export const BIN = process.env.TASKSTREAM_BIN;
if (!BIN) throw new Error('TASKSTREAM_BIN must name the taskstream binary');

/** A connected SDK client; `cut()` drops its connection (the task is not touched). */
export async function connect(transport) {
    const client = new Client({ name: 'mcp-task-events-test', version: '0.1.0' }, { capabilities: {} });
    await client.connect(transport, { timeout: 20_000 });
    return client;
}

/**
 * A connected SDK 2.x client (`@modelcontextprotocol/client`), in the 2026-07-28 era, declaring
 * the Tasks extension (without it the server refuses `tasks/stream`, -32021).
 */
export async function connectV2(transport) {
    const client = new ClientV2({ name: 'mcp-task-events-test', version: '0.1.0' }, {
        capabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } },
        versionNegotiation: { mode: 'auto' },
    });
    await client.connect(transport, { timeout: 20_000 });
    if (client.getNegotiatedProtocolVersion() !== '2026-07-28') throw new Error(`SDK 2.x negotiated ${client.getNegotiatedProtocolVersion()}`);
    return client;
}

/** A server over stdio: each `client()` is a new process running `args`. */
export function stdioServer(args) {
    return {
        async client() {
            return connect(new StdioClientTransport({ command: BIN, args, stderr: 'ignore' }));
        },
        async close() {},
    };
}

/**
 * A long-lived server that several stdio connections reach: `taskstream connect` relays each
 * to the data dir's background server, so closing a connection (killing its relay) leaves the
 * tasks running.
 */
export function connectServer(options = []) {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-task-events-'));
    const args = ['connect', '--data-dir', dir, '--idle-exit', '30', '--durability', 'none', ...options];
    return {
        dir,
        async client(sdk = 'v1') {
            if (sdk === 'v2') return connectV2(new StdioTransportV2({ command: BIN, args, stderr: 'ignore' }));
            return connect(new StdioClientTransport({ command: BIN, args, stderr: 'ignore' }));
        },
        async close() {
            spawnSync(BIN, ['connect', '--stop', '--data-dir', dir], { stdio: 'ignore', timeout: 20_000 });
            rmSync(dir, { recursive: true, force: true });
        },
    };
}

/** `taskstream serve ... --http 127.0.0.1:0`; each `client()` is a new 2025-11-25 session. */
export async function httpServer(args) {
    const proc = spawn(BIN, [...args, '--http', '127.0.0.1:0'], { stdio: ['ignore', 'ignore', 'pipe'] });
    const url = await new Promise((resolve, reject) => {
        let err = '';
        const timer = setTimeout(() => reject(new Error(`no "listening on" line in 20 s: ${err}`)), 20_000);
        proc.stderr.on('data', d => {
            err += d.toString();
            const m = /listening on (http:\/\/127\.0\.0\.1:\d+\/mcp)/.exec(err);
            if (m) {
                clearTimeout(timer);
                resolve(m[1]);
            }
        });
        proc.on('exit', code => reject(new Error(`server exited ${code}: ${err}`)));
    });
    proc.stderr.resume();
    return {
        url,
        async client(sdk = 'v1') {
            if (sdk === 'v2') return connectV2(new HttpTransportV2(new URL(url)));
            return connect(new StreamableHTTPClientTransport(new URL(url)));
        },
        async close() {
            const exited = new Promise(r => proc.once('exit', r));
            proc.kill('SIGTERM');
            await exited;
        },
    };
}

/**
 * Starts `emit` as a task (2025-11-25 `params.task`) on an SDK 1.x client and answers its id.
 * (SDK 2.x refuses a `tools/call` answered with a task unless its Tasks extension package
 * drives the call; the tests of SDK 2.x follows start their tasks through a 1.x client of the
 * same server: a task belongs to the server and its principal, not to a connection.)
 */
export async function startEmit(client, args) {
    const r = await client.request(
        { method: 'tools/call', params: { name: 'emit', arguments: args, task: { ttl: 60_000 } } },
        ResultSchema, { timeout: 20_000 });
    if (typeof r.task?.taskId !== 'string') throw new Error(`tools/call as a task answered ${JSON.stringify(r)}`);
    return r.task.taskId;
}

const ANY_RESULT = Object.freeze({
    safeParse: data => ({ success: true, data }),
    parse: data => data,
    '~standard': Object.freeze({ version: 1, vendor: 'mcp-task-events-test', validate: value => ({ value }) }),
});
// The ids of the tasks each SDK 2.x test client created, in order (see conformanceClient).
const createdTasks = new WeakMap();

/**
 * `taskstream conformance-server ...args` over stdio, one process per client, on SDK 1.x
 * (2025-11-25) or SDK 2.x (2026-07-28). Each process is a server of its own, so a task to
 * follow on it is started by the same client: use `startEmitOn(client, args)`. SDK 2.x answers
 * a `tools/call` that became a task (`resultType: "task"`) with UNSUPPORTED_RESULT_TYPE unless
 * the Tasks extension package drives the call; the client's transport is watched for that
 * result, whose `taskId` `startEmitOn` then answers.
 */
export async function conformanceClient(args, sdk = 'v1') {
    if (sdk !== 'v2') return connect(new StdioClientTransport({ command: BIN, args: ['conformance-server', ...args], stderr: 'ignore' }));
    const transport = new StdioTransportV2({ command: BIN, args: ['conformance-server', ...args], stderr: 'ignore' });
    const client = await connectV2(transport);
    const created = [];
    const onmessage = transport.onmessage;
    transport.onmessage = (message, ...rest) => {
        if (message?.result?.resultType === 'task' && typeof message.result.taskId === 'string') created.push(message.result.taskId);
        return onmessage.call(transport, message, ...rest);
    };
    createdTasks.set(client, created);
    return client;
}

/** Starts `emit` as a task on `client` (of either SDK, from `conformanceClient`) and answers its id. */
export async function startEmitOn(client, args) {
    const created = createdTasks.get(client);
    if (!created) return startEmit(client, args);
    const before = created.length;
    await client.request({ method: 'tools/call', params: { name: 'emit', arguments: args } }, ANY_RESULT, { timeout: 20_000 })
        .then(r => { throw new Error(`tools/call answered without a task: ${JSON.stringify(r)}`); },
            e => { if (e?.code !== 'UNSUPPORTED_RESULT_TYPE') throw e; });
    if (created.length !== before + 1) throw new Error(`tools/call created ${created.length - before} tasks`);
    return created[before];
}

/** Waits (bounded) until `cond()` holds. */
export async function until(cond, what, ms = 20_000) {
    const deadline = Date.now() + ms;
    while (!(await cond())) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise(r => setTimeout(r, 20));
    }
}

export const range = (a, b) => Array.from({ length: b - a + 1 }, (_, i) => a + i);
