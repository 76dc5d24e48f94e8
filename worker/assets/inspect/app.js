/**
 * The inspector page (docs/inspector.md): sign in, the thread list, a thread's turns and, for each
 * provider request of a turn, what the model saw. Plain ES modules, no build step.
 */
import { Api, ApiProblem } from "./api.js";
import { append, h, replace, svg } from "./dom.js";
import * as m from "./model.js";

const KEY_STORAGE = "spindle.inspector.key";
/** Turns fetched per page: a long thread opens with one page, older ones load as you scroll. */
const TURN_PAGE = 50;
/** Characters of an item's text shown before "show all". */
const CLIP = 600;

const main = document.getElementById("main");
const signOutButton = document.getElementById("sign-out");
let api = null;
/** The current view's controller: aborting it stops its requests and its event stream. */
let viewAbort = new AbortController();

signOutButton.addEventListener("click", () => signOut());
window.addEventListener("hashchange", () => route());
route();

function signOut(message) {
  sessionStorage.removeItem(KEY_STORAGE);
  api = null;
  route(message);
}

/** What a failure means for a person; a rejected key ends the session. */
function describe(err) {
  if (err instanceof ApiProblem) {
    if (err.status === 401) return "That key was not accepted. Check it and sign in again.";
    if (err.status === 403) return "That key may not read threads: it needs the threads scope.";
    return `${err.message} (${err.status}${err.code ? ` ${err.code}` : ""})`;
  }
  return `The service could not be reached: ${err?.message ?? err}`;
}

function fail(region, err) {
  if (err?.name === "AbortError") return;
  if (err instanceof ApiProblem && err.status === 401) {
    signOut(describe(err));
    return;
  }
  replace(region, h("p", { class: "error", role: "alert" }, describe(err)));
}

/** `#/` the list, `#/thread/ID`, `#/thread/ID/turn/TURN`. */
function route(message) {
  viewAbort.abort();
  viewAbort = new AbortController();
  // The key of this tab's session, from an earlier sign-in (a reload keeps it, a new tab not).
  const stored = sessionStorage.getItem(KEY_STORAGE);
  api = stored ? (api?.key === stored ? api : new Api(stored)) : null;
  signOutButton.hidden = api === null;
  if (api === null) return signInView(message);
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (parts[0] === "thread" && parts[1]) return threadView(parts[1], parts[3] ?? null);
  return threadListView();
}

function focusHeading() {
  main.querySelector("h1")?.focus();
}

// ——— Sign in ———

function signInView(message) {
  const input = h("input", {
    id: "key",
    name: "key",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    "aria-describedby": "key-help",
  });
  const status = h("p", { id: "sign-in-status", class: "error", role: "alert" }, message ?? "");
  const button = h("button", { type: "submit" }, "Sign in");
  const form = h(
    "form",
    {
      class: "sign-in",
      onsubmit: async (event) => {
        event.preventDefault();
        const key = input.value.trim();
        if (!key) return;
        button.disabled = true;
        status.textContent = "";
        try {
          // Any tenant route tells whether the key is accepted; the listing is the one we need.
          await new Api(key).get("/v1/threads?limit=1");
          sessionStorage.setItem(KEY_STORAGE, key);
          api = new Api(key);
          route();
        } catch (err) {
          status.textContent = describe(err);
          button.disabled = false;
          input.focus();
        }
      },
    },
    h("label", { for: "key" }, "API key"),
    input,
    h(
      "p",
      { id: "key-help", class: "hint" },
      "Kept in this tab only (sessionStorage) and sent as a bearer header.",
    ),
    button,
    status,
  );
  replace(main, h("h1", { tabindex: "-1" }, "Sign in"), form);
  input.focus();
}

// ——— Thread list ———

function threadListView() {
  const signal = viewAbort.signal;
  const idInput = h("input", { id: "open-id", name: "id", required: true, spellcheck: "false" });
  const openStatus = h("p", { class: "error", role: "alert" });
  const open = h(
    "form",
    {
      class: "inline",
      "aria-label": "Open a thread by id",
      onsubmit: async (event) => {
        event.preventDefault();
        const id = idInput.value.trim();
        openStatus.textContent = "";
        try {
          await api.get(`/v1/threads/${encodeURIComponent(id)}`, signal);
          location.hash = `#/thread/${encodeURIComponent(id)}`;
        } catch (err) {
          if (err instanceof ApiProblem && err.status === 404) {
            openStatus.textContent = `No thread “${id}” for this key.`;
          } else fail(openStatus, err);
        }
      },
    },
    h("label", { for: "open-id" }, "Thread id"),
    idInput,
    h("button", { type: "submit" }, "Open"),
  );

  const metaInput = h("input", {
    id: "search-metadata",
    name: "metadata",
    placeholder: "key=value key2=value2",
    spellcheck: "false",
  });
  const statusSelect = h(
    "select",
    { id: "search-status", name: "status" },
    ["", "idle", "running", "requires_action"].map((s) => h("option", { value: s }, s || "any")),
  );
  const results = h("div", { id: "thread-results", "aria-live": "polite" });
  const search = h(
    "form",
    {
      class: "inline",
      role: "search",
      "aria-label": "Search threads",
      onsubmit: (event) => {
        event.preventDefault();
        listThreads(results, metaInput.value, statusSelect.value, null, signal);
      },
    },
    h("label", { for: "search-metadata" }, "Metadata"),
    metaInput,
    h("label", { for: "search-status" }, "Status"),
    statusSelect,
    h("button", { type: "submit" }, "Search"),
  );
  replace(main, h("h1", { tabindex: "-1" }, "Threads"), open, openStatus, search, results);
  listThreads(results, "", "", null, signal);
  focusHeading();
}

async function listThreads(results, metadata, status, cursor, signal) {
  const parsed = m.parseMetadataFilter(metadata);
  if (parsed.error)
    return replace(results, h("p", { class: "error", role: "alert" }, parsed.error));
  const query = new URLSearchParams({ limit: "25" });
  if (status) query.set("status", status);
  for (const [key, value] of parsed.filters) query.set(`metadata[${key}]`, value);
  if (cursor) query.set("cursor", cursor);
  try {
    const page = await api.get(`/v1/threads?${query}`, signal);
    let body = results.querySelector("tbody");
    if (!cursor || !body) {
      body = h("tbody");
      replace(
        results,
        page.data.length === 0
          ? h("p", {}, "No threads match.")
          : h(
              "table",
              { class: "threads" },
              h("caption", { class: "visually-hidden" }, "Threads, latest activity first"),
              h(
                "thead",
                {},
                h(
                  "tr",
                  {},
                  ["Thread", "Status", "Turns", "Last activity", "Metadata"].map((t) =>
                    h("th", { scope: "col" }, t),
                  ),
                ),
              ),
              body,
            ),
      );
    }
    for (const thread of page.data) {
      body.append(
        h(
          "tr",
          { dataset: { threadId: thread.id } },
          h("td", {}, h("a", { href: `#/thread/${encodeURIComponent(thread.id)}` }, thread.id)),
          h("td", {}, h("span", { class: `status status-${thread.status}` }, thread.status)),
          h("td", { class: "num" }, thread.turn_count),
          h("td", {}, time(thread.updated_at)),
          h(
            "td",
            { class: "meta" },
            Object.entries(thread.metadata ?? {}).map(([k, v]) => h("code", {}, `${k}=${v}`)),
          ),
        ),
      );
    }
    results.querySelector(".more")?.remove();
    if (page.next_cursor) {
      results.append(
        h(
          "button",
          {
            class: "more",
            onclick: () => listThreads(results, metadata, status, page.next_cursor, signal),
          },
          "More threads",
        ),
      );
    }
  } catch (err) {
    fail(results, err);
  }
}

// ——— One thread ———

function threadView(threadId, initialTurn) {
  const signal = viewAbort.signal;
  const state = {
    threadId,
    turns: [],
    nextCursor: null,
    /** False when the server has no turn list: the latest turn and live ones are shown. */
    listed: true,
    selected: null,
    loading: false,
  };
  const summary = h("div", { class: "thread-summary" });
  const live = h("p", { class: "live", role: "status", id: "live-status" }, "Connecting…");
  const chart = h("figure", { class: "chart", id: "usage-chart" });
  const list = h("ol", { class: "turns", id: "turn-list", "aria-label": "Turns, newest first" });
  const more = h("button", { class: "more", id: "older-turns", hidden: true }, "Older turns");
  const note = h("p", { class: "hint", id: "turn-note" });
  const detail = h("section", { class: "detail", id: "turn-detail", "aria-label": "Turn detail" });
  const timeline = h(
    "section",
    { class: "timeline", "aria-labelledby": "timeline-heading" },
    h("h2", { id: "timeline-heading" }, "Turns"),
    chart,
    note,
    list,
    more,
  );
  replace(
    main,
    h("p", {}, h("a", { href: "#/" }, "← Threads")),
    h("h1", { tabindex: "-1" }, "Thread ", h("code", {}, threadId)),
    live,
    summary,
    h("div", { class: "thread-layout" }, timeline, detail),
  );
  focusHeading();

  const renderTurns = () => {
    replace(
      list,
      // Newest first: a rollback recorded before a turn goes right below it.
      state.turns.map((turn) => [turnRow(turn, state), rollbackRow(turn.rollback_before)]),
    );
    renderChart(chart, state.turns);
    more.hidden = !state.nextCursor;
  };
  const select = (turnId) => {
    state.selected = turnId;
    for (const button of list.querySelectorAll("button.turn")) {
      button.setAttribute("aria-pressed", String(button.dataset.turnId === turnId));
    }
    history.replaceState(
      null,
      "",
      `#/thread/${encodeURIComponent(threadId)}/turn/${encodeURIComponent(turnId)}`,
    );
    turnDetail(detail, threadId, turnId, signal);
  };
  state.select = select;

  const loadTurns = async () => {
    if (state.loading) return;
    state.loading = true;
    try {
      const query = new URLSearchParams({ limit: String(TURN_PAGE) });
      if (state.nextCursor) query.set("cursor", state.nextCursor);
      const page = await api.get(
        `/v1/threads/${encodeURIComponent(threadId)}/turns?${query}`,
        signal,
      );
      const known = new Set(state.turns.map((t) => t.id));
      state.turns.push(...page.data.filter((t) => !known.has(t.id)));
      state.nextCursor = page.next_cursor;
      renderTurns();
    } catch (err) {
      if (
        err instanceof ApiProblem &&
        (err.status === 404 || err.status === 405) &&
        state.turns.length === 0
      ) {
        // The thread exists (read above): the server is older than the turn list (405: the path
        // has only POST there; 404: no such path).
        state.listed = false;
        note.textContent =
          "This server has no turn list (GET …/turns): the latest turn and new ones are shown.";
        await showLatestTurn();
      } else fail(note, err);
    } finally {
      state.loading = false;
    }
  };
  const showLatestTurn = async () => {
    const thread = state.thread;
    if (!thread?.last_turn_id) return renderTurns();
    const turn = await api.get(
      `/v1/threads/${encodeURIComponent(threadId)}/turns/${encodeURIComponent(thread.last_turn_id)}`,
      signal,
    );
    upsertTurn(state, summaryOfTurn(turn));
    renderTurns();
  };
  more.addEventListener("click", loadTurns);
  // Older turns load when the end of the list comes into view, one page at a time.
  const observer = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting) && state.nextCursor) loadTurns();
  });
  observer.observe(more);
  signal.addEventListener("abort", () => observer.disconnect());
  // Up and down arrows move between turns; Enter or Space selects (they are buttons).
  list.addEventListener("keydown", (event) => {
    if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
    const buttons = [...list.querySelectorAll("button.turn")];
    const at = buttons.indexOf(document.activeElement);
    const next = buttons[at + (event.key === "ArrowDown" ? 1 : -1)];
    if (next) {
      event.preventDefault();
      next.focus();
    }
  });

  const refreshThread = async () => {
    state.thread = await api.get(`/v1/threads/${encodeURIComponent(threadId)}`, signal);
    renderSummary(summary, state.thread);
  };
  (async () => {
    try {
      await refreshThread();
    } catch (err) {
      if (err instanceof ApiProblem && err.status === 404) {
        replace(
          detail,
          h("p", { class: "error", role: "alert" }, `No thread “${threadId}” for this key.`),
        );
        live.textContent = "";
        return;
      }
      return fail(detail, err);
    }
    await loadTurns();
    const first = initialTurn ?? state.turns[0]?.id;
    if (first) select(first);
    else replace(detail, h("p", {}, "No turns yet."));
    followEvents(state, { live, renderTurns, refreshThread, detail, signal });
  })();
}

/** A TurnSummary from a Turn resource (a live event, or the fallback without the list route). */
function summaryOfTurn(turn) {
  const items = turn.items ?? [];
  const input = items.find(
    (i) => i.type === "message" && i.role === "user" && !m.contextSectionOf(i),
  );
  const output = items.findLast((i) => i.type === "message" && i.role === "assistant");
  return {
    object: "turn.summary",
    id: turn.id,
    kind: turn.kind ?? "turn",
    ...(turn.trigger ? { trigger: turn.trigger } : {}),
    status: turn.status,
    created_at: turn.created_at ?? null,
    completed_at: turn.completed_at ?? null,
    usage: turn.usage ?? null,
    input_preview: input ? m.summarize(input) : null,
    output_preview: output ? m.summarize(output) : null,
  };
}

/** Adds a turn at the top, or updates the one with its id (what the list said stays). */
function upsertTurn(state, summary) {
  const at = state.turns.findIndex((t) => t.id === summary.id);
  if (at === -1) state.turns.unshift(summary);
  else {
    const old = state.turns[at];
    state.turns[at] = {
      ...old,
      status: summary.status,
      usage: summary.usage ?? old.usage,
      input_preview: old.input_preview ?? summary.input_preview,
      output_preview: summary.output_preview ?? old.output_preview,
    };
  }
}

const TERMINAL = new Set([
  "turn.completed",
  "turn.requires_action",
  "turn.interrupted",
  "turn.failed",
]);

/** New turns appear while you watch: the thread's events, resumed after a break. */
function followEvents(state, { live, renderTurns, refreshThread, detail, signal }) {
  let refreshTimer = null;
  const refreshSoon = (turnId) => {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(() => {
      refreshThread().catch(() => {});
      if (state.selected === turnId) turnDetail(detail, state.threadId, turnId, signal);
    }, 250);
  };
  api
    .follow(state.threadId, {
      signal,
      onStatus: (status) => {
        live.dataset.state = status;
        live.textContent =
          status === "live"
            ? "Live: new turns appear as they start."
            : status === "reconnecting"
              ? "Reconnecting to the event stream…"
              : "Missed events expired: reload to catch up.";
      },
      onEvent: ({ event, data }) => {
        if (event === "turn.started" || TERMINAL.has(event)) {
          const turn = data?.data;
          if (turn?.id) {
            upsertTurn(state, summaryOfTurn(turn));
            renderTurns();
            if (state.selected) {
              for (const b of document.querySelectorAll("#turn-list button.turn")) {
                b.setAttribute("aria-pressed", String(b.dataset.turnId === state.selected));
              }
            }
            if (TERMINAL.has(event)) refreshSoon(turn.id);
          }
        } else if (event === "item.completed" && data?.turn_id === state.selected) {
          refreshSoon(data.turn_id);
        }
      },
    })
    .catch((err) => fail(live, err));
}

function renderSummary(el, thread) {
  const usage = thread.usage;
  replace(
    el,
    h(
      "dl",
      { class: "facts" },
      fact("Status", h("span", { class: `status status-${thread.status}` }, thread.status)),
      fact("Turns", thread.turn_count),
      fact("Model", thread.config?.model ?? "–"),
      fact("Last activity", time(thread.updated_at)),
      usage
        ? fact(
            "Usage",
            `${m.tokens(usage.input_tokens)} in (${m.tokens(usage.cached_input_tokens)} cached), ${m.tokens(usage.output_tokens)} out, ${usage.requests} requests`,
          )
        : null,
      thread.forked_from
        ? fact(
            "Forked from",
            h(
              "a",
              { href: `#/thread/${encodeURIComponent(thread.forked_from)}` },
              thread.forked_from,
            ),
          )
        : null,
      Object.keys(thread.metadata ?? {}).length
        ? fact(
            "Metadata",
            Object.entries(thread.metadata).map(([k, v]) => h("code", {}, `${k}=${v}`)),
          )
        : null,
    ),
  );
}

const fact = (term, ...value) => [h("dt", {}, term), h("dd", {}, ...value)];

function turnRow(turn, state) {
  const compaction = turn.kind === "compaction";
  return h(
    "li",
    { class: compaction ? "compaction" : null },
    h(
      "button",
      {
        class: "turn",
        type: "button",
        "aria-pressed": String(state.selected === turn.id),
        dataset: { turnId: turn.id },
        onclick: () => state.select(turn.id),
      },
      h(
        "span",
        { class: "turn-head" },
        compaction
          ? h(
              "span",
              { class: "badge badge-compaction" },
              `compaction${turn.trigger ? ` (${turn.trigger})` : ""}`,
            )
          : null,
        h("span", { class: `status status-${turn.status}` }, turn.status),
        turn.created_at ? h("time", { datetime: turn.created_at }, time(turn.created_at)) : null,
        turn.usage
          ? h(
              "span",
              { class: "usage" },
              `${m.tokens(turn.usage.input_tokens)} in · ${m.tokens(turn.usage.cached_input_tokens)} cached · ${m.tokens(turn.usage.output_tokens)} out`,
            )
          : null,
      ),
      turn.input_preview ? h("span", { class: "preview" }, "› ", turn.input_preview) : null,
      turn.output_preview ? h("span", { class: "preview out" }, "‹ ", turn.output_preview) : null,
      h("code", { class: "turn-id" }, turn.id),
    ),
  );
}

/** The marker for rollbacks between two turns: text says it, not the colour or the dashes. */
function rollbackRow(rollback) {
  if (!rollback) return null;
  return h(
    "li",
    { class: "rollback" },
    h("span", { class: "badge badge-rollback" }, m.rollbackText(rollback.turns)),
    " ",
    h("time", { datetime: rollback.at }, time(rollback.at)),
  );
}

/** Input and cached tokens of the loaded turns, oldest on the left (inline SVG, no library). */
function renderChart(figure, turns) {
  const points = turns.filter((t) => t.usage).reverse();
  if (points.length === 0) return replace(figure);
  const width = 320;
  const height = 64;
  const max = Math.max(1, ...points.map((t) => t.usage.input_tokens));
  const step = width / points.length;
  const bars = points.map((t, i) => {
    const total = (t.usage.input_tokens / max) * height;
    const cached = (t.usage.cached_input_tokens / max) * height;
    return svg(
      "g",
      {},
      svg(
        "title",
        {},
        `${t.id}: ${t.usage.input_tokens} input tokens, ${t.usage.cached_input_tokens} cached`,
      ),
      svg("rect", {
        class: "bar-input",
        x: i * step,
        y: height - total,
        width: Math.max(1, step - 1),
        height: total,
      }),
      svg("rect", {
        class: "bar-cached",
        x: i * step,
        y: height - cached,
        width: Math.max(1, step - 1),
        height: cached,
      }),
    );
  });
  const sum = (f) => points.reduce((n, t) => n + f(t.usage), 0);
  const input = sum((u) => u.input_tokens);
  const cached = sum((u) => u.cached_input_tokens);
  replace(
    figure,
    svg(
      "svg",
      {
        viewBox: `0 0 ${width} ${height}`,
        role: "img",
        "aria-label": `Input tokens per turn, the cached part darker, for ${points.length} turns`,
        preserveAspectRatio: "none",
      },
      bars,
    ),
    h(
      "figcaption",
      {},
      `${points.length} turns: ${m.tokens(input)} input tokens, ${input ? Math.round((cached / input) * 100) : 0}% from cache.`,
    ),
  );
}

// ——— One turn ———

async function turnDetail(detail, threadId, turnId, signal) {
  const base = `/v1/threads/${encodeURIComponent(threadId)}/turns/${encodeURIComponent(turnId)}`;
  detail.setAttribute("aria-busy", "true");
  try {
    const [turn, requests] = await Promise.all([
      api.get(base, signal),
      api.get(`${base}/requests`, signal).catch((err) => {
        if (err instanceof ApiProblem && (err.status === 404 || err.status === 405)) return null;
        throw err;
      }),
    ]);
    const requestsRegion = h("div", { class: "requests" });
    replace(
      detail,
      h("h2", {}, turn.kind === "compaction" ? "Compaction " : "Turn ", h("code", {}, turn.id)),
      h(
        "dl",
        { class: "facts" },
        fact("Status", h("span", { class: `status status-${turn.status}` }, turn.status)),
        turn.usage ? fact("Usage", usageText(turn.usage)) : null,
        turn.error ? fact("Error", `${turn.error.code}: ${turn.error.message}`) : null,
        turn.pending_calls?.length
          ? fact("Waiting on", turn.pending_calls.map((c) => c.name).join(", "))
          : null,
      ),
      requestsRegion,
      h(
        "section",
        { class: "recorded", "aria-labelledby": "recorded-heading" },
        h("h3", { id: "recorded-heading" }, "Recorded items"),
        toolPairs(
          turn.items,
          new Map(),
          new Set(turn.items.filter(m.isToolOutput).map((o) => o.call_id)),
        ),
        itemList(turn.items, { firstNew: turn.items.length }),
      ),
    );
    if (requests === null) {
      replace(
        requestsRegion,
        h("p", { class: "hint" }, "This server does not list a turn's requests (GET …/requests)."),
      );
    } else renderRequests(requestsRegion, requests);
  } catch (err) {
    fail(detail, err);
  } finally {
    detail.removeAttribute("aria-busy");
  }
}

function renderRequests(region, { data: requests, lines }) {
  if (requests.length === 0)
    return replace(region, h("p", {}, "No provider request in this turn."));
  const body = h("div", { class: "request" });
  const tabs = requests.map((request, index) =>
    h(
      "button",
      {
        type: "button",
        class: "request-tab",
        "aria-pressed": "false",
        dataset: { step: request.step },
        onclick: () => show(index),
      },
      `Request ${request.step}`,
      request.kind === "compaction" ? " (compaction)" : "",
    ),
  );
  const show = (index) => {
    for (const [i, tab] of tabs.entries()) tab.setAttribute("aria-pressed", String(i === index));
    renderRequest(body, requests, index, lines);
  };
  replace(
    region,
    h("h3", {}, "Provider requests"),
    h("div", { class: "request-tabs", role: "group", "aria-label": "Requests of this turn" }, tabs),
    body,
  );
  show(0);
}

function renderRequest(el, requests, index, lines) {
  const request = requests[index];
  const firstNew = m.firstNewIndex(request);
  const cache = request.cache ?? {};
  const recorded = m.recordedOutputIds(lines);
  const servers = m.serverToolCalls(lines);
  const worldState = m.worldStateLinesFor(requests, index, lines);
  replace(
    el,
    h(
      "dl",
      { class: "facts" },
      fact("Model", request.model),
      fact("Sent", time(request.created_at)),
      request.usage ? fact("Usage", usageText(request.usage)) : null,
      fact(
        "Cache",
        `${cache.reused_prefix_items ?? 0} items (${cache.reused_prefix_bytes ?? 0} bytes) reused, ${cache.new_bytes ?? 0} new bytes`,
        cache.provider_cached_tokens === null || cache.provider_cached_tokens === undefined
          ? ""
          : `, ${cache.provider_cached_tokens} tokens cached by the provider`,
        cache.break_reason
          ? h("span", { class: "badge badge-break" }, `break: ${cache.break_reason}`)
          : null,
      ),
    ),
    h(
      "details",
      { class: "instructions" },
      h("summary", {}, `Instructions (${request.instructions.length} characters)`),
      h("pre", {}, request.instructions),
    ),
    h(
      "details",
      { class: "tools" },
      h(
        "summary",
        {},
        `Tools (${request.tools.length})${request.parallel_tool_calls ? ", parallel calls" : ""}`,
      ),
      h(
        "ul",
        {},
        request.tools.map((tool) =>
          h(
            "li",
            {},
            h("code", {}, tool.name ?? tool.type),
            tool.description ? ` — ${tool.description}` : "",
            tool.parameters ? h("pre", {}, JSON.stringify(tool.parameters, null, 2)) : null,
          ),
        ),
      ),
    ),
    worldState.length
      ? h(
          "section",
          { class: "world-state", "aria-label": "World-state diff" },
          h("h4", {}, "World-state diff behind this request's context items"),
          worldState.map(({ seq, line }) =>
            h(
              "div",
              {},
              h("p", {}, `Line ${seq}: ${line.payload?.full ? "full snapshot" : "merge patch"}`),
              h("pre", {}, JSON.stringify(line.payload?.state, null, 2)),
            ),
          ),
        )
      : null,
    toolPairs(request.input.slice(firstNew), servers, recorded),
    h(
      "h4",
      { id: "input-heading" },
      `Input: ${request.input.length} items, ${request.input.length - firstNew} new since the previous request`,
    ),
    firstNew > 0
      ? lazyDetails("reused", `${firstNew} items the previous request sent too`, () =>
          itemList(request.input.slice(0, firstNew), { firstNew, recorded }),
        )
      : null,
    itemList(request.input.slice(firstNew), { firstNew: 0, recorded, offset: firstNew }),
    h(
      "details",
      { class: "raw" },
      h("summary", {}, `Raw rollout lines (${lines.length})`),
      h(
        "ol",
        { class: "lines" },
        lines.map(({ seq, line }) =>
          h(
            "li",
            { class: seq === request.seq ? "this-request" : null },
            h("span", { class: "seq" }, seq),
            h("code", {}, JSON.stringify(line)),
          ),
        ),
      ),
    ),
  );
}

/** Each tool call beside its output; server-side (MCP) calls with their server and duration. */
function toolPairs(items, servers, recorded) {
  const pairs = m.pairToolCalls(items);
  if (pairs.length === 0) return null;
  return h(
    "section",
    { class: "tool-calls", "aria-label": "Tool calls" },
    h("h4", {}, `Tool calls (${pairs.length})`),
    h(
      "ul",
      {},
      pairs.map(({ call, output }) => {
        const callId = call?.call_id ?? output?.call_id;
        const server = servers.get(callId);
        const synthetic = output !== null && m.isSyntheticOutput(output, recorded);
        return h(
          "li",
          { class: "tool-pair", dataset: { callId } },
          h(
            "div",
            { class: "call" },
            h("span", { class: "role" }, "call"),
            call
              ? h("code", { class: "tool-name" }, call.name ?? call.type)
              : h("em", {}, "call not in view"),
            call ? h("code", { class: "args" }, call.arguments ?? call.input ?? "") : null,
            server
              ? h(
                  "span",
                  { class: "badge badge-server" },
                  `server ${server.server ?? "?"}`,
                  server.duration_ms === null ? "" : `, ${server.duration_ms} ms`,
                  server.success === false ? ", failed" : "",
                  server.approval ? `, approval ${server.approval}` : "",
                )
              : null,
          ),
          h(
            "div",
            { class: "output" },
            h("span", { class: "role" }, "output"),
            output === null
              ? h("em", {}, "no output yet")
              : [
                  synthetic ? h("span", { class: "badge badge-synthetic" }, "synthetic") : null,
                  h("pre", {}, clip(m.outputText(output.output))),
                ],
          ),
        );
      }),
    ),
  );
}

/**
 * A `<details>` whose content is built when first opened: a long thread's request repeats
 * thousands of items the previous request sent, which nobody reads unless they ask.
 */
function lazyDetails(className, label, build) {
  let built = false;
  const details = h(
    "details",
    {
      class: className,
      ontoggle: () => {
        if (built || !details.open) return;
        built = true;
        details.append(build());
      },
    },
    h("summary", {}, label),
  );
  return details;
}

/** Items a list shows at once; "Show more" adds as many again. */
const ITEMS_PER_PAGE = 200;

/**
 * Items in order, a page at a time; those from `firstNew` on (indexes counted from `offset`) are
 * highlighted as new; context items labelled.
 */
function itemList(items, { firstNew, recorded = null, offset = 0 }) {
  const list = h("ol", { class: "items", start: offset + 1 });
  let shown = 0;
  const more = h("button", { type: "button", class: "more", onclick: () => showMore() });
  const showMore = () => {
    const next = items.slice(shown, shown + ITEMS_PER_PAGE);
    append(
      list,
      next.map((item, i) =>
        itemEntry(item, offset + shown + i, offset + shown + i >= firstNew, recorded),
      ),
    );
    shown += next.length;
    const left = items.length - shown;
    more.hidden = left === 0;
    replace(more, `Show ${Math.min(left, ITEMS_PER_PAGE)} more of ${left} items`);
  };
  showMore();
  return h("div", { class: "item-list" }, list, more);
}

/** One item of a list: its kind, context section, synthetic mark and text. */
function itemEntry(item, index, isNew, recorded) {
  const section = m.contextSectionOf(item);
  // Only a request's input can hold made-up outputs; recorded items are what the rollout has.
  const synthetic = recorded !== null && m.isSyntheticOutput(item, recorded);
  return h(
    "li",
    {
      class: ["item", `item-${item.type}`, isNew ? "new" : null, section ? "context" : null]
        .filter(Boolean)
        .join(" "),
      dataset: { index, ...(section?.section ? { section: section.section } : {}) },
    },
    h(
      "div",
      { class: "item-head" },
      isNew ? h("span", { class: "badge badge-new" }, "new") : null,
      h("span", { class: "kind" }, item.type === "message" ? item.role : item.type),
      section ? h("span", { class: "badge badge-context" }, section.label) : null,
      synthetic ? h("span", { class: "badge badge-synthetic" }, "synthetic") : null,
      item.call_id ? h("code", { class: "call-id" }, item.call_id) : null,
    ),
    h("pre", {}, clip(itemText(item))),
  );
}

function itemText(item) {
  if (item.type === "message") return m.textsOf(item).join("\n\n") || JSON.stringify(item.content);
  if (m.isToolCall(item)) return `${item.name ?? item.type}(${item.arguments ?? item.input ?? ""})`;
  if (m.isToolOutput(item)) return m.outputText(item.output);
  if (item.type === "reasoning") return (item.summary ?? []).map((s) => s.text).join("\n");
  return JSON.stringify(item, null, 2);
}

/** Long text is cut, with the whole of it one click away. */
function clip(text) {
  if (text.length <= CLIP) return text;
  return [
    text.slice(0, CLIP),
    h("details", {}, h("summary", {}, `show all ${text.length} characters`), text.slice(CLIP)),
  ];
}

const usageText = (u) =>
  `${u.input_tokens} in (${u.cached_input_tokens} cached), ${u.output_tokens} out${u.reasoning_output_tokens ? ` (${u.reasoning_output_tokens} reasoning)` : ""}`;

function time(iso) {
  if (!iso) return "–";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}
