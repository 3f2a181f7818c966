// The official SDK's resumable Streamable HTTP server: one stateful session, the SDK's example
// InMemoryEventStore, the `emit` tool (see common.mjs). Listens on 127.0.0.1 only; prints
// `listening <port>` on stdout once ready. Usage: node http-server.mjs [port]
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import { makeServer } from './common.mjs';

const transport = new StreamableHTTPServerTransport({
  sessionIdGenerator: () => randomUUID(),
  eventStore: new InMemoryEventStore(),
});
const server = makeServer('ts-sdk-http', { gapMs: 3 });
await server.connect(transport);

const httpServer = http.createServer(async (req, res) => {
  if (req.url !== '/mcp') {
    res.writeHead(404).end();
    return;
  }
  try {
    await transport.handleRequest(req, res);
  } catch (e) {
    process.stderr.write(`request failed: ${e}\n`);
    if (!res.headersSent) res.writeHead(500).end();
  }
});
httpServer.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
  process.stdout.write(`listening ${httpServer.address().port}\n`);
});
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
