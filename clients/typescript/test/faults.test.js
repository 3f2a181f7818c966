// followTask against `taskstream conformance-server --fault NAME`: the client survives each
// client fault (docs/specification/tasks-stream.md, section 5.5) and detects each server fault
// that breaks a rule the follow relies on; on SDK 1.x clients (2025-11-25) and on SDK 2.x
// clients (2026-07-28) alike.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { EventsGoneError, MemoryCursorStore, StreamViolationError, followTask, getEventRange } from '../src/index.js';
import { conformanceClient, range, startEmitOn as startEmit, until } from './helpers.js';

const clients = [];
let sdk = 'v1';
async function faulty(faults) {
    const c = await conformanceClient(['--fault', faults], sdk);
    clients.push(c);
    return c;
}
async function collect(follow) {
    const seqs = [];
    for await (const e of follow) seqs.push(e.seq);
    return seqs;
}

for (const version of ['v1', 'v2']) {
    describe(`client faults: survived, SDK ${version}`, { timeout: 120_000 }, () => {
        before(() => { sdk = version; });
        after(async () => {
            for (const c of clients) await c.close().catch(() => {});
        });

        test('close-early: reopens with after = the last processed seq until the task is terminal', async () => {
            const c = await faulty('close-early');
            const taskId = await startEmit(c, { count: 10, interval_ms: 50 });
            const follow = followTask({ client: c, taskId });
            assert.deepEqual(await collect(follow), range(0, 11));
            assert.equal(follow.outcome.status, 'completed');
            // The server closed the first stream after 3 events (the task still ran): the next one
            // resumed after seq 2, the last one processed; every later one after its predecessor's last.
            const afters = follow.stats.afters;
            assert.deepEqual(afters.slice(0, 2), [undefined, 2], JSON.stringify(afters));
            for (let i = 2; i < afters.length; i++) assert.ok(afters[i] > afters[i - 1], JSON.stringify(afters));
            assert.equal(follow.stats.duplicates, 0);
        });

        test('duplicate-on-resume: repeated events are dropped by (taskId, seq)', async () => {
            const c = await faulty('close-early,duplicate-on-resume');
            const taskId = await startEmit(c, { count: 10, interval_ms: 20 });
            const follow = followTask({ client: c, taskId });
            assert.deepEqual(await collect(follow), range(0, 11));
            assert.ok(follow.stats.duplicates >= 2, JSON.stringify(follow.stats));
        });

        test('gone-on-resume: recover records the lost seq; fail throws EventsGoneError', async () => {
            for (const policy of ['recover', 'fail']) {
                const c = await faulty('gone-on-resume');
                const taskId = await startEmit(c, { count: 10, interval_ms: 20 });
                // Process up to seq 2, stop, let the task end: the resume then finds seq 3 gone.
                const cursors = new MemoryCursorStore();
                const first = followTask({ client: c, taskId, cursors });
                for await (const e of first) if (e.seq === 2) first.cancel();
                await until(async () => (await getEventRange(c, taskId)).terminal, 'the task to end');
                const follow = followTask({ client: c, taskId, cursors, onEventsGone: policy });
                if (policy === 'fail') {
                    await assert.rejects(collect(follow), e => e instanceof EventsGoneError && e.after === 2 && e.earliestSeq === 4);
                    continue;
                }
                assert.deepEqual(await collect(follow), range(4, 11));
                assert.deepEqual(follow.gaps.map(g => [g.first, g.last]), [[3, 3]], 'earliestSeq = after + 2 loses one seq');
                assert.equal(follow.outcome.status, 'completed');
            }
        });

        test('push-unsolicited: an event sent while no stream is open is not relied on', async () => {
            const c = await faulty('push-unsolicited');
            const taskId = await startEmit(c, { count: 5, interval_ms: 10 });
            const follow = followTask({ client: c, taskId });
            assert.deepEqual(await collect(follow), range(0, 6));
            assert.equal(follow.stats.duplicates, 0);
            assert.equal(follow.outcome.status, 'completed');
        });

        for (const fault of ['replay-includes-cursor', 'after-last-not-immediate']) {
            test(`${fault}: an event at the cursor sent again is dropped by (taskId, seq)`, async () => {
                const c = await faulty(fault);
                const taskId = await startEmit(c, { count: 6, interval_ms: 20 });
                const processed = [];
                const follow = followTask({ client: c, taskId });
                await follow.run(e => { processed.push(e.seq); });
                assert.deepEqual(processed, range(0, 7), 'every event processed once');
                assert.ok(follow.stats.duplicates >= 1, JSON.stringify(follow.stats));
                assert.equal(follow.outcome.status, 'completed');
            });
        }

        test('unprefixed-type: an event type the host does not know is handed on and its seq committed (§4.3)', async () => {
            const c = await faulty('unprefixed-type');
            const taskId = await startEmit(c, { count: 4, interval_ms: 10 });
            const cursors = new MemoryCursorStore();
            const follow = followTask({ client: c, taskId, cursors });
            const types = [];
            for await (const e of follow) types.push(e.type);
            assert.deepEqual(types.slice(1, 5), ['tick', 'tick', 'tick', 'tick']);
            assert.equal(cursors.load(taskId), 5);
            assert.equal(follow.outcome.status, 'completed');
        });

        test('never-close: a stream not answered after the terminal event ends by the idle check', async () => {
            const c = await faulty('never-close');
            const taskId = await startEmit(c, { count: 5, interval_ms: 10 });
            const follow = followTask({ client: c, taskId, idleTimeoutMs: 500 });
            assert.deepEqual(await collect(follow), range(0, 6));
            assert.equal(follow.outcome.status, 'completed');
        });
    });

    describe(`server faults: detected, SDK ${version}`, { timeout: 120_000 }, () => {
        before(() => { sdk = version; });
        after(async () => {
            for (const c of clients) await c.close().catch(() => {});
        });
        for (const [fault, what] of [
            ['reorder', /seq 3 follows cursor 1: expected 2/],
            ['drop-live-event', /seq 4 follows cursor 2: expected 3/],
            ['skip-seq', /seq 3 follows cursor 1: expected 2/],
            ['drop-meta', /no related-task _meta/],
            ['meta-mismatch', /no related-task _meta/],
            ['foreign-task-id', /names task/],
        ]) {
            test(`${fault}: StreamViolationError`, async () => {
                const c = await faulty(fault);
                const taskId = await startEmit(c, { count: 6, interval_ms: 20 });
                await assert.rejects(collect(followTask({ client: c, taskId })),
                    e => e instanceof StreamViolationError && what.test(e.message) ? true : assert.fail(`${e}`));
            });
        }

        // The task's first event (seq 0, its working status) is retained before any stream opens.
        for (const [fault, earliest] of [['no-after-live-only', 1], ['live-before-replay', 1]]) {
            test(`${fault}: a stream without after that skips the retained events is a gap, never processed out of order`, async () => {
                const c = await faulty(fault);
                const taskId = await startEmit(c, { count: 50, interval_ms: 20 });
                await assert.rejects(collect(followTask({ client: c, taskId })),
                    e => e instanceof EventsGoneError && e.earliestSeq >= earliest && e.after === undefined ? true : assert.fail(`${e}`));
            });
        }

        test('start-at-one: a stream without after that does not start at 0 is a gap (EventsGoneError under fail)', async () => {
            const c = await faulty('start-at-one');
            const taskId = await startEmit(c, { count: 6, interval_ms: 20 });
            await assert.rejects(collect(followTask({ client: c, taskId })),
                e => e instanceof EventsGoneError && e.earliestSeq === 1 && e.after === undefined);
        });
    });
}
