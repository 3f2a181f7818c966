// followTask against `taskstream serve`: over stdio (through `taskstream connect`, whose
// background server keeps tasks running when a connection drops) and over Streamable HTTP, on
// SDK 1.x clients (2025-11-25: sessions) and SDK 2.x clients (2026-07-28: stateless requests).

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
    EventsGoneError, FileCursorStore, MemoryCursorStore, cancelTask, followTask, getEventRange,
} from '../src/index.js';
import { connectServer, httpServer, range, startEmit as startEmitV1, until } from './helpers.js';

const SERVE = ['serve', '--in-memory', '--durability', 'none'];
const SMALL = [...SERVE, '--max-events-per-task', '5'];

// Over stdio every connection is a `taskstream connect` relay to one background server per
// data dir, so tasks outlive connections there as they do over HTTP.
const transports = {
    stdio: { main: async () => connectServer(), small: async () => connectServer(['--max-events-per-task', '5']) },
    http: { main: async () => httpServer(SERVE), small: async () => httpServer(SMALL) },
};
// SDK 1.x (2025-11-25) and SDK 2.x (2026-07-28): the follows run on clients of one or the
// other; tasks are started by an SDK 1.x client of the same server (see helpers.startEmit).
const SDKS = ['v1', 'v2'];

for (const [name, make] of Object.entries(transports)) for (const sdk of SDKS) {
    describe(`over ${name}, SDK ${sdk}`, { timeout: 120_000 }, () => {
        let main;
        let small;
        const clients = [];
        const client = async server => {
            const c = await server.client(sdk);
            clients.push(c);
            return c;
        };
        const starters = new Map();
        const startEmit = async (_follower, args, server = main) => {
            if (!starters.has(server)) starters.set(server, await server.client('v1'));
            clients.push(starters.get(server));
            return startEmitV1(starters.get(server), args);
        };
        before(async () => {
            main = await make.main();
            small = await make.small();
        });
        after(async () => {
            for (const c of clients) await c.close().catch(() => {});
            await main?.close();
            await small?.close();
        });

        test('follows a task from the start to its terminal status', async () => {
            const c = await client(main);
            const taskId = await startEmit(c, { count: 8, interval_ms: 10 });
            const follow = followTask({ client: c, taskId });
            const seen = [];
            for await (const e of follow) seen.push(e);
            assert.deepEqual(seen.map(e => e.seq), range(0, 9));
            assert.equal(seen[0].payload.status, 'working');
            assert.deepEqual(seen.slice(1, 9).map(e => e.payload.i), range(0, 7));
            assert.equal(follow.outcome.status, 'completed');
            assert.equal(follow.outcome.cancelled, false);
            assert.equal(follow.cursor, 9);
            const r = await getEventRange(c, taskId);
            assert.deepEqual([r.status, r.earliestSeq, r.latestSeq, r.nextSeq], ['completed', 0, 9, 10]);
        });

        test('a cut mid-task: reconnects, resumes after the last processed seq, processes each event once', async () => {
            const dir = mkdtempSync(join(tmpdir(), 'cursors-'));
            try {
                const first = await client(main);
                const taskId = await startEmit(first, { count: 30, interval_ms: 30 });
                const processed = [];
                let cutDone = false;
                const cursorsAtReconnect = [];
                const follow = followTask({
                    client: first,
                    taskId,
                    cursors: new FileCursorStore(dir, { sync: false }),
                    reconnect: async () => {
                        cursorsAtReconnect.push(follow.cursor);
                        return client(main);
                    },
                });
                const outcome = await follow.run(async e => {
                    processed.push(e.seq);
                    if (e.seq === 5 && !cutDone) {
                        cutDone = true;
                        await first.close(); // the connection drops; the task runs on
                    }
                });
                assert.deepEqual(processed, range(0, 31), 'every event processed once, in order');
                assert.equal(outcome.status, 'completed');
                assert.ok(follow.stats.reconnects >= 1, JSON.stringify(follow.stats));
                assert.equal(follow.stats.afters[0], undefined);
                // Events already received when the cut came are still processed; the resume
                // names the last one processed.
                assert.ok(cursorsAtReconnect[0] >= 5, JSON.stringify(cursorsAtReconnect));
                assert.equal(follow.stats.afters[1], cursorsAtReconnect[0], `resumed with after = the last processed seq: ${JSON.stringify(follow.stats.afters)}`);
                assert.equal(await new FileCursorStore(dir).load(taskId), 31);
                const late = await client(main);
                const lateSeen = [];
                const lateFollow = followTask({ client: late, taskId });
                for await (const e of lateFollow) lateSeen.push(e.seq);
                assert.deepEqual(lateSeen, range(0, 31), 'a late joiner replays the whole task');
                assert.equal(lateFollow.outcome.status, 'completed');
            } finally {
                rmSync(dir, { recursive: true, force: true });
            }
        });

        test('cancelling the follow leaves the task running; tasks/cancel ends it', async () => {
            const c = await client(main);
            const taskId = await startEmit(c, { count: 200, interval_ms: 20 });
            const cursors = new MemoryCursorStore();
            const follow = followTask({ client: c, taskId, cursors });
            const seen = [];
            for await (const e of follow) {
                seen.push(e.seq);
                if (e.seq === 3) follow.cancel();
            }
            assert.equal(follow.outcome.cancelled, true);
            assert.equal(cursors.load(taskId), 3);
            assert.equal((await getEventRange(c, taskId)).status, 'working', 'cancelling the follow must not cancel the task');
            await cancelTask(c, taskId);
            const rest = followTask({ client: c, taskId, cursors });
            const more = [];
            for await (const e of rest) more.push(e);
            assert.equal(more[0].seq, 4, 'the next follow starts after the cursor');
            assert.equal(more.at(-1).payload.status, 'cancelled');
            assert.equal(rest.outcome.status, 'cancelled');
        });

        test('a late joiner of a running task; tasks/get reports the range without a replay', async () => {
            const c = await client(main);
            const taskId = await startEmit(c, { count: 60, interval_ms: 25 });
            // tasks/get opens no stream: no event of the task reaches this client.
            const heard = [];
            c.fallbackNotificationHandler = async n => { if (n.method === 'notifications/tasks/event') heard.push(n); };
            await until(async () => ((await getEventRange(c, taskId)).latestSeq ?? -1) >= 10, 'ten events');
            const r = await getEventRange(c, taskId);
            assert.equal(r.status, 'working');
            assert.equal(r.terminal, false);
            assert.equal(r.earliestSeq, 0);
            assert.ok(r.latestSeq >= 10 && r.nextSeq === r.latestSeq + 1, JSON.stringify(r));
            assert.deepEqual(heard, [], 'tasks/get delivered events');
            // A joiner that comes late gets the retained events, then the live ones, each once.
            const late = await client(main);
            const follow = followTask({ client: late, taskId });
            const seqs = [];
            for await (const e of follow) seqs.push(e.seq);
            assert.deepEqual(seqs, range(0, 61));
            assert.equal(follow.stats.duplicates, 0);
            assert.equal(follow.outcome.status, 'completed');
        });

        test('a follow from after; an after beyond the stored cursor reports the skipped range', async () => {
            const c = await client(main);
            const taskId = await startEmit(c, { count: 8 });
            // An after beyond the task's last event is refused: let the task end first.
            await until(async () => (await getEventRange(c, taskId)).terminal, 'the task to end');
            const follow = followTask({ client: c, taskId, after: 4 });
            const seqs = [];
            for await (const e of follow) seqs.push(e.seq);
            assert.deepEqual(seqs, range(5, 9), 'from after: nothing at or before it');
            assert.equal(follow.stats.afters[0], 4);
            assert.deepEqual(follow.gaps, []);
            const cursors = new MemoryCursorStore();
            cursors.save(taskId, 2);
            const past = followTask({ client: c, taskId, cursors, after: 6 });
            const rest = [];
            for await (const e of past) rest.push(e.seq);
            assert.deepEqual(rest, range(7, 9));
            assert.deepEqual(past.gaps.map(g => [g.first, g.last]), [[3, 6]]);
            assert.equal(cursors.load(taskId), 9);
        });

        test('events_gone: fail, or recover from earliestSeq - 1 and report the gap', async () => {
            const c = await client(small);
            const taskId = await startEmit(c, { count: 12 }, small);
            await until(async () => (await getEventRange(c, taskId)).terminal, 'the task to end');
            const r = await getEventRange(c, taskId);
            assert.deepEqual([r.earliestSeq, r.latestSeq], [9, 13]);

            const stale = new MemoryCursorStore();
            stale.save(taskId, 1);
            await assert.rejects(
                async () => { for await (const e of followTask({ client: c, taskId, cursors: stale })) void e; },
                e => e instanceof EventsGoneError && e.earliestSeq === 9 && e.after === 1 && e.code === -32010);

            const gaps = [];
            const recover = followTask({ client: c, taskId, cursors: stale, onEventsGone: 'recover', onGap: g => gaps.push(g) });
            const seen = [];
            for await (const e of recover) seen.push(e.seq);
            assert.deepEqual(seen, range(9, 13));
            assert.deepEqual(gaps.map(g => [g.first, g.last]), [[2, 8]]);
            assert.equal(recover.outcome.status, 'completed');

            // Without a cursor the stream starts at the earliest retained event: the same choice.
            await assert.rejects(
                async () => { for await (const e of followTask({ client: c, taskId })) void e; },
                e => e instanceof EventsGoneError && e.earliestSeq === 9);
            const fresh = followTask({ client: c, taskId, onEventsGone: 'recover' });
            const all = [];
            for await (const e of fresh) all.push(e.seq);
            assert.deepEqual(all, range(9, 13));
            assert.deepEqual(fresh.gaps.map(g => [g.first, g.last]), [[0, 8]]);
        });
    });
}
