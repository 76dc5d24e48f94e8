import type { TurnRequestsResource } from "../../shared/api/index.ts";
import { turnRequests } from "../../shared/model-requests/index.ts";
import { type LiveThread, readWholeRollout } from "./live-thread.ts";
import type { TurnRow } from "./storage/meta-store.ts";

/**
 * `GET …/turns/{turn}/requests` (design §13): the turn's provider requests rebuilt from the
 * rollout, and the turn's raw lines. It reads the rollout from its start: each request's input
 * is the history the lines before it rebuild.
 */
export async function turnRequestsResource(
  live: LiveThread,
  row: TurnRow,
): Promise<TurnRequestsResource> {
  const { lines } = await readWholeRollout(live.parts, live.meta, live.log);
  const through = lines.filter((l) => l.seq <= row.last_seq);
  const data = turnRequests(through, row.first_seq, row.last_seq, live.replayOptions);
  return {
    object: "turn.requests",
    turn_id: row.id,
    data,
    lines: through
      .filter((l) => l.seq >= row.first_seq)
      .map(({ seq, text }) => ({ seq, line: JSON.parse(text) })),
  };
}
