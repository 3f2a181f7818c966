// A follow that starts from a checkpoint after a gap tells the host so (the task's state is in
// the checkpoint, covering the events the host never saw): against a scripted server that holds
// a task as `taskstream serve --retain-from-checkpoint` keeps it (test/checkpoint-server.mjs).

import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { EventsGoneError, MemoryCursorStore, followTask } from '../src/index.js';
import { connectServer, httpServer, range, startEmit } from './helpers.js';

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

// The ticks a host counts: from the latest checkpoint it was handed, plus the ticks after.
function ticksRebuilt(events) {
    let ticks = 0;
    for (const e of events) {
        if (e.fromCheckpoint && e.checkpoint) ticks = e.checkpoint.state.ticks;
        else if (e.type === 'dev.taskstream.tick') ticks += 1;
    }
    return ticks;
}

// `taskstream serve --retain-from-checkpoint` itself, over stdio (through `taskstream connect`,
// whose background server keeps the task) and over Streamable HTTP, on SDK 1.x and 2.x.
const REAL = {
    stdio: () => connectServer(['--retain-from-checkpoint']),
    http: () => httpServer(['serve', '--in-memory', '--durability', 'none', '--retain-from-checkpoint']),
};
for (const [name, make] of Object.entries(REAL)) for (const sdk of ['v1', 'v2']) {
    test(`over ${name}, SDK ${sdk}: a late joiner of the real server rebuilds the state from its checkpoint`, { timeout: 120_000 }, async () => {
        const server = await make();
        const opened = [];
        const open = async kind => {
            const c = await server.client(kind);
            opened.push(c);
            return c;
        };
        try {
            // emit: seq 0 its status, ticks 1..10, a checkpoint at 11 ({ticks: 10}), ticks
            // 12..21, a checkpoint at 22 ({ticks: 20}), ticks 23..27, its last status at 28.
            const taskId = await startEmit(await open('v1'), { count: 25, interval_ms: 2, checkpoint_every: 10 });
            // A follower from the start, live: it may fall behind a checkpoint and recover from
            // it, but it ends with the terminal status and rebuilds the same count of ticks.
            const live = followTask({ client: await open(sdk), taskId, onEventsGone: 'recover' });
            const liveEvents = await collect(live);
            assert.equal(live.outcome.status, 'completed');
            assert.equal(ticksRebuilt(liveEvents), 25);

            const late = followTask({ client: await open(sdk), taskId, onEventsGone: 'recover' });
            const events = await collect(late);
            assert.deepEqual(events.map(e => e.seq), range(22, 28));
            assert.equal(events[0].fromCheckpoint, true);
            assert.deepEqual(events[0].checkpoint, { coversThrough: 21, state: { ticks: 20 } });
            assert.deepEqual(late.stats.checkpointStarts, [22]);
            assert.equal(ticksRebuilt(events), 25);
            assert.equal(late.outcome.status, 'completed');
        } finally {
            for (const c of opened) await c.close().catch(() => {});
            await server.close();
        }
    });
}
