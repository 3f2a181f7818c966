// Shared by the HTTP interop checks: start `taskstream serve --http 127.0.0.1:0`, a TCP
// proxy in front of it that can cut one connection in the middle of a response (a dropped SSE
// stream, as a flaky network would drop it), and an HTTP proxy that records every exchange (to
// check what a client that prints only its result did on the wire).

import { spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { assert, serverCommand } from './events.mjs';

/** Starts the server; resolves to { url, port, stop }. */
export async function startHttpServer(extra = []) {
    const { bin, args } = serverCommand();
    const child = spawn(bin, [...args, '--http', '127.0.0.1:0', ...extra], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    const url = await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no listening line in 20 s: ${stderr}`)), 20_000);
        child.stderr.on('data', d => {
            stderr = (stderr + d.toString()).slice(-20000);
            const m = stderr.match(/listening on (http:\/\/127\.0\.0\.1:(\d+)\/mcp)/);
            if (m) {
                clearTimeout(timer);
                resolve(m[1]);
            }
        });
        child.on('exit', code => reject(new Error(`server exited (${code}): ${stderr}`)));
    });
    const port = Number(new URL(url).port);
    return { url, port, stop: () => child.kill('SIGTERM'), stderr: () => stderr };
}

/**
 * A proxy to 127.0.0.1:`target()` (the server is started after it, to accept the proxy's
 * `Host`). `cutWhen(requestText, responseSoFar)` is asked on each chunk of
 * each response; the first time it returns true that connection is destroyed (both ways).
 * Resolves to { url, cuts() }.
 */
export async function startCuttingProxy(target, cutWhen) {
    let cuts = 0;
    const server = net.createServer(client => {
        const upstream = net.connect(target(), '127.0.0.1');
        let request = '';
        let response = '';
        let cut = false;
        client.on('data', d => {
            request += d.toString();
            upstream.write(d);
        });
        upstream.on('data', d => {
            if (cut) return;
            response += d.toString();
            if (cutWhen(request, response)) {
                cut = true;
                cuts += 1;
                // Forward what came up to here, then drop the connection mid-response.
                client.write(d, () => {
                    client.destroy();
                    upstream.destroy();
                });
                return;
            }
            client.write(d);
        });
        const close = () => {
            client.destroy();
            upstream.destroy();
        };
        client.on('error', close);
        upstream.on('error', close);
        client.on('end', () => upstream.end());
        upstream.on('end', () => client.end());
    });
    await new Promise(r => server.listen(0, '127.0.0.1', r));
    const proxyPort = server.address().port;
    assert(proxyPort > 0, 'proxy did not bind');
    return { url: `http://127.0.0.1:${proxyPort}/mcp`, port: proxyPort, cuts: () => cuts, close: () => server.close() };
}

/**
 * An HTTP proxy to 127.0.0.1:`target()` that passes every request and response through
 * unchanged (streamed as it comes) and records each exchange: `{ method, request, status,
 * contentType, response }` with the bodies as text. `messages(exchange)` parses a response body
 * (JSON, or the `data:` of each SSE event) into its JSON-RPC messages. Resolves to
 * { url, port, exchanges(), close() }.
 */
export async function startRecordingProxy(target) {
    const log = [];
    const server = http.createServer((req, res) => {
        const body = [];
        req.on('data', c => body.push(c));
        req.on('end', () => {
            const request = Buffer.concat(body);
            const ex = { method: req.method, request: request.toString(), status: 0, contentType: '', response: '' };
            log.push(ex);
            const upstream = http.request(
                { host: '127.0.0.1', port: target(), method: req.method, path: req.url, headers: req.headers },
                up => {
                    ex.status = up.statusCode;
                    ex.contentType = String(up.headers['content-type'] ?? '');
                    res.writeHead(up.statusCode, up.headers);
                    up.on('data', d => {
                        ex.response += d.toString();
                        res.write(d);
                    });
                    up.on('end', () => res.end());
                    up.on('error', () => res.destroy());
                });
            upstream.on('error', () => res.destroy());
            // A client that closes its response early closes the upstream request too.
            res.on('close', () => upstream.destroy());
            upstream.end(request);
        });
    });
    await new Promise(r => server.listen(0, '127.0.0.1', r));
    const port = server.address().port;
    assert(port > 0, 'recording proxy did not bind');
    return {
        url: `http://127.0.0.1:${port}/mcp`,
        port,
        exchanges: () => log.slice(),
        close: () => server.close(),
    };
}

/** The JSON-RPC messages of one recorded response (a JSON body or an SSE stream); [] if none. */
export function messages(exchange) {
    const text = exchange.response;
    if (!text.trim()) return [];
    if (exchange.contentType.startsWith('text/event-stream')) {
        return text.split(/\r?\n\r?\n/).flatMap(block => {
            const data = block.split(/\r?\n/).filter(l => l.startsWith('data:')).map(l => l.slice(5).replace(/^ /, '')).join('\n');
            if (!data) return [];
            try {
                return [JSON.parse(data)];
            } catch {
                return [{ unparsed: data }];
            }
        });
    }
    try {
        const v = JSON.parse(text);
        return Array.isArray(v) ? v : [v];
    } catch {
        return [{ unparsed: text }];
    }
}
