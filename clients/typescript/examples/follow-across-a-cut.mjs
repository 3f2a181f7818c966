// The README's demo, runnable: follows a running task across a dropped connection.
//
//   taskstream serve --in-memory --http 127.0.0.1:8080 &
//   node examples/follow-across-a-cut.mjs http://127.0.0.1:8080/mcp
//
// Starts `emit {count: 20, interval_ms: 50}` as a task, follows it, drops the connection after
// seq 5 while the task runs, and goes on through `reconnect` on a new one. Prints each event as
// it is processed and exits non-zero unless every event was processed exactly once.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { FileCursorStore, followTask } from '@taskstream/mcp-task-events';

const url = new URL(process.argv[2] ?? 'http://127.0.0.1:8080/mcp');
const connect = async () => {
    const client = new Client({ name: 'host', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(url));
    return client;
};
const first = await connect();
const { task } = await first.request(
    { method: 'tools/call', params: { name: 'emit', arguments: { count: 20, interval_ms: 50 }, task: {} } }, ResultSchema);
const taskId = task.taskId;
const dir = mkdtempSync(join(tmpdir(), 'cursors-'));

// --- the demo, as in the README ---------------------------------------------------------------
const follow = followTask({
    client: first, taskId,
    cursors: new FileCursorStore(dir),
    reconnect: async lost => (await lost.close().catch(() => {}), connect()),
    onEventsGone: 'recover', onGap: g => console.warn(`lost ${g.first}..${g.last}`),
});
const seen = [];
for await (const { seq, type, payload } of follow) {
    console.log(seq, type, JSON.stringify(payload));
    seen.push(seq);
    if (seq === 5) await first.close(); // the connection drops here; the task runs on
}
console.log('task ended', follow.outcome.status);
// ----------------------------------------------------------------------------------------------

await follow.client.close();
rmSync(dir, { recursive: true, force: true });
const once = seen.length === 22 && seen.every((s, i) => s === i);
console.log(`${seen.length} events, ${once ? 'each processed once, in order' : 'NOT each once: ' + JSON.stringify(seen)}; ` +
    `${follow.stats.reconnects} reconnect(s), streams opened with after = ${JSON.stringify(follow.stats.afters)}`);
process.exit(once && follow.stats.reconnects >= 1 && follow.outcome.status === 'completed' ? 0 : 1);
