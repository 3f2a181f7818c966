// Interop check: the official TypeScript MCP SDK (v1, 2025-11-25 era, SEP-1686 tasks) as a
// client of `taskstream gateway` in front of the official reference server
// `@modelcontextprotocol/server-everything` (pinned in tests/interop/gateway).
//
// It calls the reference server's `trigger-long-running-operation` as a task through the SDK's
// experimental Tasks API, follows the task's progress with `tasks/stream`, cuts the stream part
// way (the request is aborted; the task goes on), resumes with `after` = the last seq it
// processed, and checks that it saw every progress step exactly once, seq gap-free, ending in
// the status `tasks/get` reports, with the reference server's result. Exit 1 with a last line
// `error: ...` on any violated property.
//
// Environment: TASKSTREAM_BIN (required) the taskstream binary.

import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod/v4';
import { STATUS_TYPE, assert, show, sleep, step, checkEnvelopes, dedupe, runCheck } from '../common/events.mjs';

const REQUEST_TIMEOUT = 20_000;
const PROGRESS_TYPE = 'dev.taskstream.progress';
const STEPS = 10;
const PermissiveResult = z.looseObject({});
const events = [];
const eventsOf = taskId => events.filter(e => e.taskId === taskId);

async function main() {
    const bin = process.env.TASKSTREAM_BIN;
    assert(bin, 'TASKSTREAM_BIN is not set');
    const everything = fileURLToPath(new URL(
        '../gateway/node_modules/@modelcontextprotocol/server-everything/dist/index.js', import.meta.url));
    const transport = new StdioClientTransport({
        command: bin,
        args: ['gateway', '--in-memory', '--durability', 'none', '--', process.execPath, everything, 'stdio'],
        stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', d => { stderr = (stderr + d.toString()).slice(-20000); });
    const client = new Client({ name: 'taskstream-interop-ts-gateway', version: '1.0.0' }, { capabilities: {} });
    client.setNotificationHandler(
        z.object({ method: z.literal('notifications/tasks/event'), params: z.looseObject({}) }),
        n => { events.push(n.params); });
    try {
        await client.connect(transport, { timeout: REQUEST_TIMEOUT });
        const caps = client.getServerCapabilities();
        assert(caps?.tasks?.eventStreams, `gateway capabilities lack tasks.eventStreams: ${show(caps)}`);
        assert(caps?.prompts && caps?.resources, `the inner server's prompts and resources are not offered: ${show(caps)}`);
        const { tools } = await client.listTools(undefined, { timeout: REQUEST_TIMEOUT });
        const tool = tools.find(t => t.name === 'trigger-long-running-operation');
        assert(tool, `tools/list has no trigger-long-running-operation: ${show(tools.map(t => t.name))}`);
        assert(tool.execution?.taskSupport === 'optional', `its execution is ${show(tool.execution)}`);
        step(`initialize and tools/list through the gateway: ${tools.length} tools of server-everything`);

        // Call it as a task; follow with tasks/stream; cut after a few events.
        let taskId;
        let callResult;
        const abort = new AbortController();
        let first;
        for await (const message of client.experimental.tasks.callToolStream(
            { name: tool.name, arguments: { duration: 2, steps: STEPS } },
            CallToolResultSchema,
            { task: { ttl: 60_000 }, timeout: REQUEST_TIMEOUT }
        )) {
            if (message.type === 'taskCreated') {
                taskId = message.task.taskId;
                first = client.request({ method: 'tasks/stream', params: { taskId } }, PermissiveResult,
                    { signal: abort.signal, timeout: REQUEST_TIMEOUT });
                first.catch(() => {});
                for (let t = 0; eventsOf(taskId).length < 3; t++) {
                    assert(t < 200, `only ${eventsOf(taskId).length} events after 10 s`);
                    await sleep(50);
                }
                abort.abort('cut');
                const seen = eventsOf(taskId);
                const last = seen[seen.length - 1].seq;
                step(`task ${taskId}: followed to seq ${last}, then the stream was cut; resuming with after ${last}`);
                const resumed = await client.request({ method: 'tasks/stream', params: { taskId, after: last } },
                    PermissiveResult, { timeout: REQUEST_TIMEOUT });
                assert(Object.keys(resumed).filter(k => k !== '_meta').length === 0, `tasks/stream result ${show(resumed)}`);
            } else if (message.type === 'result') {
                callResult = message.result;
            } else if (message.type === 'error') {
                assert(false, `callToolStream yielded an error: ${message.error?.message ?? message.error}`);
            }
        }
        assert(taskId && callResult, 'callToolStream gave no task or no result');
        const evs = dedupe(eventsOf(taskId)).sort((a, b) => a.seq - b.seq);
        checkEnvelopes(evs, taskId, 0);
        assert(evs.length === STEPS + 2, `${evs.length} events, expected ${STEPS + 2}: ${show(evs.map(e => e.type))}`);
        assert(evs[0].type === STATUS_TYPE && evs[0].payload.status === 'working', `first event ${show(evs[0])}`);
        evs.slice(1, -1).forEach((e, i) => {
            assert(e.type === PROGRESS_TYPE, `event seq ${e.seq}: type ${e.type}, expected ${PROGRESS_TYPE}`);
            assert(e.payload.progress === i + 1 && e.payload.total === STEPS,
                `event seq ${e.seq}: payload ${show(e.payload)}, expected progress ${i + 1} of ${STEPS}`);
        });
        const got = await client.experimental.tasks.getTask(taskId, { timeout: REQUEST_TIMEOUT });
        const lastEv = evs[evs.length - 1];
        assert(got.status === 'completed' && lastEv.type === STATUS_TYPE && lastEv.payload.status === 'completed',
            `tasks/get ${got.status}, last event ${show(lastEv)}`);
        assert(callResult.content?.[0]?.text?.includes('Long running operation completed'), `result ${show(callResult)}`);
        step(`resumed stream: progress 1..${STEPS} of ${STEPS} once each, seq 0..${STEPS + 1} gap-free, completed; result ${show(callResult.content[0].text)}`);

        const prompts = await client.listPrompts(undefined, { timeout: REQUEST_TIMEOUT });
        assert(prompts.prompts.length > 0, 'prompts/list through the gateway is empty');
        step(`prompts/list passed on: ${prompts.prompts.length} prompts`);
    } catch (e) {
        console.log('  --- gateway stderr (tail):');
        console.log(stderr.split('\n').slice(-15).join('\n'));
        throw e;
    } finally {
        await client.close().catch(() => {});
    }
}

await runCheck(main, 90);
