// Type-checked by `tsc -p tsconfig.json` (not run): the declarations fit the SDK's own types
// and the README's usage.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Client as ClientV2 } from '@modelcontextprotocol/client';
import {
    EventsGoneError, FileCursorStore, checkpointOf, followTask, getEventRange, type FollowOutcome, type TaskEvent,
} from '../src/index.js';

export async function usage(connect: () => Promise<Client>, taskId: string): Promise<FollowOutcome> {
    const follow = followTask({
        client: await connect(),
        taskId,
        cursors: new FileCursorStore('./cursors'),
        reconnect: async lost => {
            await lost.close().catch(() => {});
            return connect();
        },
        onEventsGone: 'recover',
        onGap: gap => console.warn(`lost events ${gap.first}..${gap.last}`),
    });
    for await (const event of follow) {
        const e: TaskEvent = event;
        console.log(e.seq, e.type, e.payload);
        if (e.fromCheckpoint && e.checkpoint) console.log('started from checkpoint', e.checkpoint.coversThrough, e.checkpoint.state, e.afterGap?.first);
    }
    const range = await getEventRange(follow.client, taskId);
    console.log(range.earliestSeq, range.latestSeq);
    try {
        return await followTask({ client: follow.client, taskId }).run(() => {});
    } catch (e) {
        if (e instanceof EventsGoneError) console.log(e.earliestSeq);
        throw e;
    }
}

export async function usageV2(client: ClientV2, taskId: string): Promise<number | undefined> {
    const follow = followTask({ client, taskId });
    for await (const event of follow) console.log(event.seq, checkpointOf(event)?.coversThrough);
    console.log(follow.stats.checkpointStarts.length);
    return follow.cursor;
}
