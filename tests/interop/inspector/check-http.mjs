// Interop check: the MCP Inspector's CLI mode over Streamable HTTP against
// `taskstream serve --http`.
//
// Runs `mcp-inspector --cli <url> --transport http --method tools/list` and
// `... --method tools/call --tool-name emit --tool-arg count=3` exactly as a user would, parses
// the JSON each prints, and checks it. Exit 1 with a last line `error: ...` on any failure.
//
// Environment: TASKSTREAM_BIN (required) the server binary; TASKSTREAM_ARGS (optional) its
// arguments, default `serve --in-memory --durability none`.

import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startHttpServer } from '../common/http.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const inspector = join(here, 'node_modules', '.bin', 'mcp-inspector');
const bin = process.env.TASKSTREAM_BIN;
let url = '';
const show = v => JSON.stringify(v);

class CheckFailed extends Error {}
function assert(cond, msg) {
    if (!cond) throw new CheckFailed(msg);
}

function inspect(...extra) {
    const argv = ['--cli', url, '--transport', 'http', ...extra];
    const r = spawnSync(inspector, argv, { encoding: 'utf8', timeout: 30_000 });
    // (spawnSync blocks the event loop; the server is another process.)
    const what = `mcp-inspector ${extra.join(' ')}`;
    if (r.error) throw new CheckFailed(`${what}: ${r.error.message}`);
    const err = (r.stderr ?? '').split('\n').filter(l => l.trim() && !/deprecated|Upgrade:|security fixes/.test(l));
    assert(r.status === 0, `${what}: exit ${r.status}${r.signal ? ` (${r.signal})` : ''}; stderr: ${err.join(' | ').slice(0, 600)}`);
    try {
        return JSON.parse(r.stdout);
    } catch {
        throw new CheckFailed(`${what}: stdout is not JSON: ${r.stdout.slice(0, 400)}`);
    }
}

let server;
try {
    assert(bin, 'TASKSTREAM_BIN is not set');
    server = await startHttpServer();
    url = server.url;

    const listed = inspect('--method', 'tools/list');
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
    console.log(`  ok  tools/list: ${show(names)}`);

    const called = inspect('--method', 'tools/call', '--tool-name', 'emit', '--tool-arg', 'count=3');
    assert(!called.isError, `tools/call emit count=3: isError: ${show(called)}`);
    assert(!called.task, `tools/call emit count=3 (no task requested) answered with a task: ${show(called)}`);
    assert(Array.isArray(called.content) && called.content.length > 0 && called.content[0].type === 'text'
        && typeof called.content[0].text === 'string' && called.content[0].text.length > 0,
        `tools/call emit count=3: content ${show(called.content)}, expected a text block`);
    console.log(`  ok  tools/call emit count=3: ${show(called.content[0].text)}`);

    console.log('ok');
    server.stop();
    process.exit(0);
} catch (e) {
    console.log(`error: ${e instanceof CheckFailed ? e.message : e?.stack ?? e}`);
    server?.stop();
    process.exit(1);
}
