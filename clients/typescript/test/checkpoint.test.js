// A follow that starts from a checkpoint after a gap tells the host so (the task's state is in
// the checkpoint, covering the events the host never saw): against a scripted server that holds
// a task as `taskstream serve --retain-from-checkpoint` keeps it (test/checkpoint-server.mjs).

import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { EventsGoneError, MemoryCursorStore, followTask } from '../src/index.js';

const SERVER = fileURLToPath(new URL('./checkpoint-server.mjs', import.meta.url));
const clients = [];
after(async () => {
    for (const c of clients) await c.close().catch(() => {});
});
async function connect() {
    const c = new Client({ name: 'mcp-task-events-test', version: '0.1.0' }, { capabilities: {} });
    await c.connect(new StdioClientTransport({ command: process.execPath, args: [SERVER], stderr: 'inherit' }), { timeout: 20_000 });
    clients.push(c);
    return c;
}
async function collect(follow) {
    const events = [];
    for await (const e of follow) events.push(e);
    return events;
}

test('a late joiner starts from the checkpoint, and is told so', async () => {
    const follow = followTask({ client: await connect(), taskId: 't-1', onEventsGone: 'recover' });
    const events = await collect(follow);
    assert.deepEqual(events.map(e => e.seq), [5, 6, 7]);
    assert.equal(events[0].fromCheckpoint, true);
    assert.deepEqual(events[0].checkpoint, { coversThrough: 4, state: { ticks: 4 } });
    assert.deepEqual([events[0].afterGap.first, events[0].afterGap.last], [0, 4]);
    assert.deepEqual(events.slice(1).map(e => e.fromCheckpoint), [undefined, undefined]);
    assert.deepEqual(follow.stats.checkpointStarts, [5]);
    assert.equal(follow.outcome.status, 'completed');
});

test('events_gone recovered at the checkpoint; under fail still an error', async () => {
    const c = await connect();
    const stale = new MemoryCursorStore();
    stale.save('t-1', 1);
    const follow = followTask({ client: c, taskId: 't-1', cursors: stale, onEventsGone: 'recover' });
    const events = await collect(follow);
    assert.deepEqual(events.map(e => e.seq), [5, 6, 7]);
    assert.equal(events[0].fromCheckpoint, true);
    assert.deepEqual([events[0].afterGap.first, events[0].afterGap.last], [2, 4]);
    assert.deepEqual(follow.stats.checkpointStarts, [5]);
    stale.save('t-1', 1);
    await assert.rejects(collect(followTask({ client: c, taskId: 't-1', cursors: stale })),
        e => e instanceof EventsGoneError && e.earliestSeq === 5);
});

test('a checkpoint without a gap is an event like any', async () => {
    const cursors = new MemoryCursorStore();
    cursors.save('t-1', 4);
    const follow = followTask({ client: await connect(), taskId: 't-1', cursors });
    const events = await collect(follow);
    assert.deepEqual(events.map(e => e.seq), [5, 6, 7]);
    assert.deepEqual(events[0].checkpoint, { coversThrough: 4, state: { ticks: 4 } });
    assert.equal(events[0].fromCheckpoint, undefined);
    assert.deepEqual(follow.stats.checkpointStarts, []);
    assert.deepEqual(follow.gaps, []);
});
