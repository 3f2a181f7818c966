// The official SDK's stdio transport serving the `emit` tool (see common.mjs).
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { makeServer } from './common.mjs';

const server = makeServer('ts-sdk-stdio');
await server.connect(new StdioServerTransport());
