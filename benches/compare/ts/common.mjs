// The workload both peers run: a tool `emit {count, payload_bytes}` that sends `count`
// notifications/tasks/event notifications shaped exactly like taskstream's (seq, taskId, type,
// payload {"i", "data"}, _meta related-task), through the SDK's ordinary notification path.
import { randomUUID } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// `gapMs` > 0 puts the notifications in milliseconds of their own, apart from the stream's
// priming event and the result: the example event store orders by (ms, random suffix), so
// events that share a millisecond with the cursor could otherwise be skipped on replay.
export function makeServer(name, { gapMs = 0 } = {}) {
  const server = new Server({ name, version: '0.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{
      name: 'emit',
      description: 'sends count notifications/tasks/event notifications',
      inputSchema: {
        type: 'object',
        properties: { count: { type: 'integer' }, payload_bytes: { type: 'integer' } },
        required: ['count'],
      },
    }],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const count = request.params.arguments?.count ?? 0;
    const data = 'x'.repeat(request.params.arguments?.payload_bytes ?? 0);
    const taskId = randomUUID().replaceAll('-', '');
    if (gapMs > 0) await sleep(gapMs);
    for (let i = 0; i < count; i++) {
      await extra.sendNotification({
        method: 'notifications/tasks/event',
        params: {
          seq: i + 1,
          taskId,
          type: 'dev.taskstream.tick',
          payload: { i, data },
          _meta: { 'io.modelcontextprotocol/related-task': { taskId } },
        },
      });
    }
    if (gapMs > 0) await sleep(gapMs);
    return { content: [{ type: 'text', text: `emitted ${count}` }] };
  });
  return server;
}
