// The cursor store is the host's to choose, and is committed only after the host's handler
// returned for the event (RS-08): against `taskstream conformance-server` (no fault).

import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileCursorStore, followTask } from '../src/index.js';
import { range, startEmit, stdioServer } from './helpers.js';

const clients = [];
after(async () => {
    for (const c of clients) await c.close().catch(() => {});
});

test("a host's own store: saved after the handler returned, never for an event whose handler threw", async () => {
    const c = await stdioServer(['conformance-server']).client();
    clients.push(c);
    const taskId = await startEmit(c, { count: 6, interval_ms: 10 });
    const log = [];
    const saved = new Map();
    const store = {
        async load(id) {
            return saved.get(id);
        },
        async save(id, seq) {
            log.push(`save ${seq}`);
            saved.set(id, seq);
        },
    };
    await assert.rejects(
        followTask({ client: c, taskId, cursors: store }).run(async e => {
            log.push(`handle ${e.seq}`);
            await new Promise(r => setImmediate(r));
            if (e.seq === 3) throw new Error('the host failed on seq 3');
            log.push(`handled ${e.seq}`);
        }),
        /the host failed on seq 3/);
    assert.deepEqual(log, [
        'handle 0', 'handled 0', 'save 0', 'handle 1', 'handled 1', 'save 1',
        'handle 2', 'handled 2', 'save 2', 'handle 3',
    ]);
    assert.equal(saved.get(taskId), 2);
    // The next follow (the host restarted, say) starts after seq 2: seq 3 comes again.
    const rest = [];
    const follow = followTask({ client: c, taskId, cursors: store });
    for await (const e of follow) rest.push(e.seq);
    assert.deepEqual(rest, range(3, 7));
    assert.equal(saved.get(taskId), 7);
});

test('FileCursorStore: one JSON file per task, named by the task id in hex', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cursors-'));
    try {
        const store = new FileCursorStore(dir);
        assert.equal(await store.load('t-1'), undefined);
        await store.save('t-1', 41);
        await store.save('t-1', 42);
        assert.equal(await store.load('t-1'), 42);
        assert.deepEqual(JSON.parse(readFileSync(join(dir, `${Buffer.from('t-1').toString('hex')}.cursor`), 'utf8')), { taskId: 't-1', seq: 42 });
        assert.throws(() => store.pathOf(''), TypeError);
    } finally {
        rmSync(dir, { recursive: true, force: true });
    }
});
