// Checks on SEP-2694 task events shared by the Node checks. No dependencies.

export const RELATED = 'io.modelcontextprotocol/related-task';
export const STATUS_TYPE = 'dev.taskstream.task.status';
export const TICK_TYPE = 'dev.taskstream.tick';
// A vendor prefix plus a name: at least three dot-separated labels, e.g. dev.taskstream.tick.
const PREFIXED = /^[A-Za-z0-9-]+(\.[A-Za-z0-9_-]+){2,}$/;

export class CheckFailed extends Error {}
export function fail(msg) {
    throw new CheckFailed(msg);
}
export function assert(cond, msg) {
    if (!cond) fail(msg);
}
export const show = v => JSON.stringify(v);
export const sleep = ms => new Promise(r => setTimeout(r, ms));
export function step(msg) {
    console.log(`  ok  ${msg}`);
}

/**
 * One contiguous run of a task's events: seq from `first` up, each +1, the envelope fields, the
 * related-task `_meta` naming the same task, a JSON-object payload, and a vendor-prefixed type.
 */
export function checkEnvelopes(evs, taskId, first) {
    evs.forEach((e, i) => {
        const want = first + i;
        assert(e.seq === want, `event #${i} of task ${taskId}: seq ${show(e.seq)}, expected ${want} (seqs seen: ${show(evs.map(x => x.seq))})`);
        assert(e.taskId === taskId, `event seq ${e.seq}: taskId ${show(e.taskId)}, expected ${show(taskId)}`);
        const related = e._meta?.[RELATED];
        assert(related && related.taskId === taskId,
            `event seq ${e.seq}: _meta["${RELATED}"] is ${show(related)}, expected {"taskId":${show(taskId)}}`);
        assert(typeof e.type === 'string' && PREFIXED.test(e.type), `event seq ${e.seq}: type ${show(e.type)} is not vendor-prefixed`);
        assert(e.payload !== null && typeof e.payload === 'object' && !Array.isArray(e.payload),
            `event seq ${e.seq}: payload ${show(e.payload)} is not a JSON object`);
    });
}

/** The full stream of an `emit` task: a working status event, `ticks` ticks, a terminal status event. */
export function checkEmitStream(evs, taskId, { ticks, payloadBytes, terminal }) {
    assert(evs.length === ticks + 2,
        `task ${taskId}: ${evs.length} events, expected ${ticks + 2} (${ticks} ticks + 2 status events); seqs ${show(evs.map(e => e.seq))}`);
    checkEnvelopes(evs, taskId, 0);
    assert(evs[0].type === STATUS_TYPE && evs[0].payload.status === 'working',
        `first event is ${show({ type: evs[0].type, payload: evs[0].payload })}, expected ${STATUS_TYPE} {"status":"working"}`);
    for (let i = 0; i < ticks; i++) {
        const e = evs[i + 1];
        assert(e.type === TICK_TYPE, `event seq ${e.seq}: type ${show(e.type)}, expected ${TICK_TYPE}`);
        assert(e.payload.i === i, `event seq ${e.seq}: payload.i ${show(e.payload.i)}, expected ${i}`);
        if (payloadBytes !== undefined) {
            assert(typeof e.payload.data === 'string' && e.payload.data.length === payloadBytes,
                `event seq ${e.seq}: payload.data has length ${e.payload.data?.length}, expected ${payloadBytes}`);
        }
    }
    const last = evs[evs.length - 1];
    assert(last.type === STATUS_TYPE && last.payload.status === terminal,
        `last event is ${show({ type: last.type, payload: last.payload })}, expected ${STATUS_TYPE} {"status":"${terminal}"}`);
}

/** De-duplicates by seq (a resumed stream may repeat events); a repeat must be identical. */
export function dedupe(evs) {
    const bySeq = new Map();
    for (const e of evs) {
        if (bySeq.has(e.seq)) assert(show(bySeq.get(e.seq)) === show(e), `seq ${e.seq} delivered twice with different content`);
        else bySeq.set(e.seq, e);
    }
    return [...bySeq.values()];
}

/** Runs `main` under a watchdog; prints `ok` or `error: ...` last and exits 0 or 1. */
export async function runCheck(main, seconds = 60) {
    const watchdog = setTimeout(() => {
        console.log(`error: timed out after ${seconds} s`);
        process.exit(1);
    }, seconds * 1000);
    try {
        await main();
        clearTimeout(watchdog);
        console.log('ok');
        process.exit(0);
    } catch (e) {
        console.log(`error: ${e instanceof CheckFailed ? e.message : e?.stack ?? e}`);
        process.exit(1);
    }
}

/** The server command from the environment. */
export function serverCommand() {
    const bin = process.env.TASKSTREAM_BIN;
    assert(bin, 'TASKSTREAM_BIN is not set');
    const args = (process.env.TASKSTREAM_ARGS ?? 'serve --in-memory --durability none').split(/\s+/).filter(Boolean);
    return { bin, args };
}
