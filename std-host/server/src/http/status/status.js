// The status page's module, served by the binary: the overview from /status.json, and a task's
// timeline followed through `tasks/stream` on /mcp (MCP 2026-07-28 over Streamable HTTP),
// with the SEP's client rules: events in seq order, a duplicate dropped, and when the
// connection drops the stream is reopened with `after` = the last seq received, so the
// timeline has no gap and no duplicate. `events_gone` (-32010) ends the timeline saying so.
//
// The page reads `#task=ID` (follow that task at once) and `#token=TOKEN` (a bearer token for
// /status.json and /mcp, for a server with --auth-token-file) from its URL fragment.

const MODERN = "2026-07-28";
const TASKS_EXT = "io.modelcontextprotocol/tasks";
const EVENTS_GONE = -32010;
const POLL_MS = 1000;
const POLL_TIMEOUT_MS = 10000;
const RETRY_FIRST_MS = 200;
const RETRY_MAX_MS = 5000;

const fragment = new URLSearchParams(location.hash.slice(1));
const token = fragment.get("token");

function authHeaders() {
  return token ? { authorization: `Bearer ${token}` } : {};
}

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

const wait = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- the overview -------------------------------------------------------------------------

let following = null;

// Throws on anything that keeps the overview from being shown; `poll` says it and goes on.
async function refresh() {
  // A request the server or the network never answers must not stop the polling.
  const r = await fetch("/status.json", {
    headers: authHeaders(),
    cache: "no-store",
    signal: AbortSignal.timeout(POLL_TIMEOUT_MS),
  });
  if (!r.ok) throw new Error(`HTTP ${r.status}`);
  const view = await r.json();
  if (!Array.isArray(view.tasks)) throw new Error(view.error || "no task list");
  $("summary").textContent =
    `principal ${view.principal} · store ${view.store} · ${view.ready ? "ready" : "not ready"} · ` +
    `${view.taskCount} task${view.taskCount === 1 ? "" : "s"} · ${view.streamsOpen} stream${view.streamsOpen === 1 ? "" : "s"} open`;
  const rows = view.tasks.map((t) => {
    const lags = t.streams.map((s) => s.lag).join(", ") || "–";
    const button = el("button", { type: "button", "data-follow": t.taskId }, "follow");
    button.addEventListener("click", () => follow(t.taskId));
    return el("tr", { "data-task": t.taskId, "data-streams": String(t.streams.length) },
      el("td", { class: "mono" }, t.taskId),
      el("td", {}, t.tool),
      el("td", { class: `status-${t.status}` }, t.status),
      el("td", { class: "num" }, t.earliestSeq ?? "–"),
      el("td", { class: "num" }, t.latestSeq ?? "–"),
      el("td", { class: "num" }, String(t.streams.length)),
      el("td", { class: "mono" }, lags),
      el("td", {}, button));
  });
  $("tasks").replaceChildren(...rows);
}

async function poll() {
  for (;;) {
    try {
      await refresh();
    } catch (e) {
      // An overview the page cannot show is said, and the next poll tries again.
      $("summary").textContent = `status.json: ${e.message}`;
    }
    await wait(POLL_MS);
  }
}

// ---- the timeline: tasks/stream from the browser --------------------------------------------

let nextId = 1;

function streamRequest(taskId, after) {
  const params = {
    taskId,
    _meta: {
      "io.modelcontextprotocol/protocolVersion": MODERN,
      "io.modelcontextprotocol/clientCapabilities": { extensions: { [TASKS_EXT]: {} } },
    },
  };
  if (after !== null) params.after = after;
  return { jsonrpc: "2.0", id: nextId++, method: "tasks/stream", params };
}

// Yields each SSE event's data (a JSON-RPC message) of a response body, as it arrives.
async function* sseMessages(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).replace(/^ /, "")).join("\n");
      if (data) yield JSON.parse(data);
    }
  }
}

// One follower at a time; following another task stops the previous one.
class Timeline {
  constructor(taskId) {
    this.taskId = taskId;
    this.last = null;          // the last seq received
    this.seqs = [];            // every seq shown, in order
    this.resumes = 0;
    this.duplicates = 0;
    this.gaps = 0;
    this.state = "connecting";
    this.abort = new AbortController();
    this.stopped = false;
    $("timeline-task").textContent = taskId;
    $("timeline").replaceChildren();
    $("timeline-section").hidden = false;
    this.show();
  }

  show() {
    const s = $("timeline-section");
    s.dataset.task = this.taskId;
    s.dataset.state = this.state;
    s.dataset.seqs = this.seqs.join(",");
    s.dataset.resumes = String(this.resumes);
    s.dataset.duplicates = String(this.duplicates);
    s.dataset.gaps = String(this.gaps);
    $("timeline-state").textContent = this.state;
    $("timeline-count").textContent = String(this.seqs.length);
    $("timeline-last").textContent = this.last ?? "–";
    $("timeline-resumes").textContent = String(this.resumes);
    $("timeline-dups").textContent = String(this.duplicates);
  }

  note(cls, text) {
    const list = $("timeline");
    list.append(el("li", { class: cls }, el("span", { class: "seq" }, ""), el("span", {}, text)));
    list.scrollTop = list.scrollHeight;
  }

  event(params) {
    const seq = params.seq;
    if (!Number.isSafeInteger(seq)) return;
    if (this.last !== null && seq <= this.last) {
      // A duplicate (already shown): the SEP's clients drop it.
      this.duplicates += 1;
      return;
    }
    if (this.last !== null && seq !== this.last + 1) this.gaps += 1;
    this.last = seq;
    this.seqs.push(seq);
    let payload = JSON.stringify(params.payload ?? {});
    if (payload.length > 120) payload = payload.slice(0, 117) + "…";
    const at = new Date().toISOString().slice(11, 23);
    const list = $("timeline");
    list.append(el("li", { "data-seq": String(seq) },
      el("span", { class: "seq" }, String(seq)),
      el("span", { class: "type mono" }, params.type ?? ""),
      el("span", { class: "mono" }, payload),
      el("span", { class: "muted" }, at)));
    list.scrollTop = list.scrollHeight;
  }

  // Opens tasks/stream (with `after` once anything was received) until the stream ends with
  // its result or an error; reopens it whenever the connection drops first.
  async run() {
    let retry = RETRY_FIRST_MS;
    while (!this.stopped) {
      const request = streamRequest(this.taskId, this.last);
      let ended = false;
      try {
        this.state = this.resumes ? "resuming" : "connecting";
        this.show();
        const r = await fetch("/mcp", {
          method: "POST",
          signal: this.abort.signal,
          cache: "no-store",
          headers: {
            ...authHeaders(),
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
            "mcp-method": "tasks/stream",
            "mcp-name": this.taskId,
          },
          body: JSON.stringify(request),
        });
        if (!r.ok && !(r.headers.get("content-type") || "").includes("json")) {
          if (r.status >= 400 && r.status < 500 && r.status !== 408 && r.status !== 429) {
            // Refused (no token, a foreign origin, turned off): retrying would not help.
            this.state = "error";
            this.note("error", `HTTP ${r.status}: the server refused the stream`);
            this.show();
            return;
          }
          throw new Error(`HTTP ${r.status}`);
        }
        const type = r.headers.get("content-type") || "";
        const messages = type.includes("text/event-stream")
          ? sseMessages(r.body)
          : (async function* () { yield await r.json(); })();
        this.state = "streaming";
        this.show();
        for await (const msg of messages) {
          if (msg.method === "notifications/tasks/event" && msg.params?.taskId === this.taskId) {
            this.event(msg.params);
            retry = RETRY_FIRST_MS;
            this.show();
          } else if (msg.id === request.id) {
            ended = true;
            if (msg.error) {
              const gone = msg.error.code === EVENTS_GONE;
              this.state = gone ? "events_gone" : "error";
              this.note("error", gone
                ? `events_gone: events after ${this.last} are no longer retained (earliest ${msg.error.data?.earliestSeq})`
                : `error ${msg.error.code}: ${msg.error.message}`);
            } else {
              this.state = "complete";
              this.note("end", "stream complete: the task is terminal and every event was delivered");
            }
            this.show();
            return;
          }
        }
      } catch (e) {
        if (this.stopped) return;
        if (ended) return;
      }
      if (this.stopped) return;
      // The connection dropped before the stream's result: resume after the last seq.
      this.resumes += 1;
      this.state = "disconnected";
      this.note("cut", `connection lost; resuming with after=${this.last ?? "(none)"}`);
      this.show();
      await wait(retry);
      retry = Math.min(retry * 2, RETRY_MAX_MS);
    }
  }

  stop() {
    this.stopped = true;
    this.abort.abort();
  }
}

function follow(taskId) {
  if (following) following.stop();
  following = new Timeline(taskId);
  const params = new URLSearchParams(location.hash.slice(1));
  params.set("task", taskId);
  history.replaceState(null, "", `#${params}`);
  following.run();
}

const initial = fragment.get("task");
if (initial) follow(initial);
poll();
