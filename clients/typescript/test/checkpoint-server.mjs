// A scripted MCP server on stdio (2025-11-25) holding one finished task, `t-1`, as
// `taskstream serve --retain-from-checkpoint` keeps it: events 0 to 4 dropped, then a checkpoint
// (seq 5, covering 0..4), a tick (seq 6) and the terminal status (seq 7). For the checkpoint
// tests, until those run against `taskstream serve` itself.

import { createInterface } from 'node:readline';

const TASK = 't-1';
const META = { 'io.modelcontextprotocol/related-task': { taskId: TASK } };
const EVENTS = [
    { seq: 5, type: 'dev.taskstream.checkpoint', payload: { coversThrough: 4, state: { ticks: 4 } } },
    { seq: 6, type: 'dev.taskstream.tick', payload: { i: 4 } },
    { seq: 7, type: 'dev.taskstream.task.status', payload: { status: 'completed' } },
];
const EARLIEST = 5;
const LATEST = 7;
const send = message => process.stdout.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);

createInterface({ input: process.stdin }).on('line', line => {
    if (!line.trim()) return;
    const { id, method, params = {} } = JSON.parse(line);
    if (method === 'initialize') {
        send({ id, result: { protocolVersion: '2025-11-25', capabilities: { tasks: { requests: {} } }, serverInfo: { name: 'checkpoint-server', version: '0' } } });
    } else if (method === 'ping') {
        send({ id, result: {} });
    } else if (method === 'tasks/get' && params.taskId === TASK) {
        send({ id, result: {
            taskId: TASK, status: 'completed', createdAt: '2026-12-06T00:00:00Z', lastUpdatedAt: '2026-12-06T00:00:00Z',
            ttl: 60000, pollInterval: 1000,
            _meta: { 'dev.taskstream/events': { earliestSeq: EARLIEST, latestSeq: LATEST, nextSeq: LATEST + 1 } },
        } });
    } else if (method === 'tasks/stream' && params.taskId === TASK) {
        const after = params.after;
        if (after !== undefined && after + 1 < EARLIEST) {
            send({ id, error: { code: -32010, message: 'events gone', data: { reason: 'events_gone', earliestSeq: EARLIEST } } });
            return;
        }
        for (const e of EVENTS) if (after === undefined || e.seq > after) send({ method: 'notifications/tasks/event', params: { taskId: TASK, ...e, _meta: META } });
        send({ id, result: {} });
    } else if (id !== undefined) {
        send({ id, error: { code: -32601, message: `no method ${method}` } });
    }
});
