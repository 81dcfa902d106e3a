// The status page: the model server, the MCP servers, the calls waiting for approval, recent calls and requests
// (live, over /ui/events), the playground and the tools.
// Every value from a server or a model is set as text, never as HTML.
"use strict";

const state = { tools: [], calls: [], servers: {}, requests: [], waiting: [], grants: [], tasks: [], changes: [], skills: [] };
const WAITING_POLL_MS = 5000;
const HEALTH_POLL_MS = 5000;  // the gateway looks at the model server at most this often (app/upstream/watch.py)
const SERVER_KINDS = { lmstudio: "LM Studio", llamacpp: "llama.cpp" };
const DECIDED = {
  approve: "decided: approved — the chat's next message runs it",
  deny: "decided: denied — the chat's next message declines it",
};
const SPARK_POINTS = 20;
const ASKS_FIRST = "A call waits for the person's yes (TOOLBRIDGE_CONFIRM, or the server's \"confirm\" in mcp.json).";

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child instanceof Node ? child : String(child ?? ""));
  return node;
}

async function json(path, options = {}) {
  const response = await fetch(path, { credentials: "same-origin", ...options });
  const body = await response.json();
  if (!response.ok) throw new Error(body?.error?.message || response.statusText);
  return body;
}

function duration(seconds) {
  if (seconds == null) return "";
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

function at(unixSeconds) {
  return new Date(unixSeconds * 1000).toLocaleTimeString();
}

// The model server first: whether it answers and since when, its models; red when it does not answer.
function renderUpstream(upstream) {
  if (!upstream) return;
  const down = upstream.reachable === false;
  const known = upstream.reachable === true;
  document.getElementById("upstream-section").className =
    `upstream ${down ? "down" : known ? (upstream.error ? "refuses" : "up") : ""}`;
  document.getElementById("upstream-url").textContent = upstream.url;
  const since = upstream.since ? ` since ${at(upstream.since)} (${duration(upstream.for_seconds)})` : "";
  const kind = SERVER_KINDS[upstream.kind] ? `: ${SERVER_KINDS[upstream.kind]}` : "";
  const reach = document.getElementById("upstream-reach");
  reach.textContent = down ? `not answering${since}` : known ? `answering${since}${kind}` : "not asked yet";
  reach.className = down ? "error" : known ? "ok" : "";
  const error = document.getElementById("upstream-error");
  error.textContent = upstream.error || "";
  error.hidden = !upstream.error;
  document.getElementById("upstream-models").textContent = modelsInWords(upstream, down);
}

function modelsInWords(upstream, down) {
  const named = (m) => (m.context_length ? `${m.id} (${m.context_length.toLocaleString()}-token context)` : m.id);
  const models = upstream.models || [];
  const shown = models.filter((m) => m.loaded !== false);  // LM Studio says which are loaded; others list theirs
  const idle = models.length - shown.length;
  const words = [];
  if (shown.length) words.push(`${shown.some((m) => m.loaded) ? "Loaded" : "Models"}: ${shown.map(named).join(", ")}`);
  else if (models.length) words.push("No model loaded");
  if (idle) words.push(`${idle} more downloaded, not loaded`);
  let text = words.join("; ");
  if (down && text) text = `As last seen at ${at(upstream.models_at)}: ${text}.`;
  if (upstream.model_list?.served === "last_known") {
    text += ` Model lists are answered with the last one it gave (${at(upstream.model_list.fetched_at)}), so that `
      + "clients keep their models and their chats say why they get no answer.";
  }
  return text.trim();
}

function renderHealth(health) {
  const status = document.getElementById("status");
  status.textContent = health.status;
  status.className = `badge ${health.status}`;
  renderUpstream(health.upstream);
}

async function refreshHealth() {
  try {
    renderHealth(await json("/ui/health"));
  } catch { /* the next poll tries again */ }
}

function renderServers(servers) {
  state.servers = servers;
  const rows = Object.entries(servers).map(([name, s]) => el("tr", { "data-server": name },
    el("td", {}, name),
    el("td", { class: s.state }, s.state),
    el("td", {}, s.transport),
    el("td", {}, s.protocol_version || ""),
    el("td", {}, s.tools),
    el("td", {}, s.restarts || 0),
    el("td", {}, duration(s.up_seconds)),
    el("td", { class: "error wraps" }, s.error || s.last_error || ""),
    el("td", {}, signInOrOut(name, s),
      s.state === "disabled" ? "" : el("button", { onclick: () => restart(name) }, "restart")),
  ));
  document.querySelector("#servers tbody").replaceChildren(...rows);
}

// A server that asks for OAuth (app/api/sign_in_routes.py): the sign-in is a plain link, a top-level navigation,
// because the browser itself must follow the redirect to the authorization server and come back. Offered only to
// a key that may give it (`may_sign_in`: a shared server's sign-in is the operator's).
function signInOrOut(name, s) {
  const path = `/ui/servers/${encodeURIComponent(name)}`;
  if (!s.may_sign_in) return s.state === "needs_sign_in" ? "waits for the operator's sign-in" : "";
  if (s.state === "needs_sign_in") return el("a", { class: "sign-in", href: `${path}/sign-in` }, "Sign in");
  if (s.signed_in) return el("button", { class: "sign-out", onclick: () => signOut(name) }, "Sign out");
  return "";
}

async function signOut(name) {
  try {
    await json(`/ui/servers/${encodeURIComponent(name)}/sign-out`,
      { method: "POST", headers: { "Content-Type": "application/json" } });
    document.getElementById("notice").hidden = true;  // "Signed in to ..." is no longer true
    serversChanged((await json("/ui/health")).servers || {});
  } catch (error) {
    alert(`Sign-out failed: ${error.message}`);
  }
}

// The sign-in's callback ends here as /?signed_in=NAME. Anyone can write a link so: said only of a listed server
// a person signs in to (its entry has `signed_in`), and as text.
function signedInNotice() {
  const name = new URLSearchParams(location.search).get("signed_in");
  if (name === null) return;
  history.replaceState(null, "", location.pathname);  // a reload does not say it again
  if (!Object.hasOwn(state.servers, name) || !("signed_in" in state.servers[name])) return;
  const notice = document.getElementById("notice");
  notice.textContent = `Signed in to ${name}. Its tools are offered from your next message: you may close this tab and go back to your chat.`;
  notice.hidden = false;
}

async function restart(name) {
  try {
    // Declared JSON though empty: the gateway refuses POSTs a foreign page could send without asking.
    await json(`/ui/servers/${encodeURIComponent(name)}/restart`,
      { method: "POST", headers: { "Content-Type": "application/json" } });
  } catch (error) {
    alert(`Restart failed: ${error.message}`);
  }
}

function renderCalls() {
  const rows = state.calls.slice().reverse().map((c) => el("tr", { "data-tool": c.tool },
    el("td", {}, new Date(c.at * 1000).toLocaleTimeString()),
    el("td", {}, c.request_id || ""),
    el("td", {}, c.server ? `${c.server} / ${c.tool}` : `${c.tool} (no such tool)`),
    el("td", {}, c.duration_ms),
    el("td", { class: c.outcome === "ok" ? "ok" : c.outcome === "input_needed" ? "starting" : "error" }, c.outcome),
    el("td", { class: "wraps" }, c.error || ""),
  ));
  document.querySelector("#calls tbody").replaceChildren(...rows);
  renderSparklines();
}

// Rounds waiting for the person's yes (app/ops/waiting_rounds.py): one row per call, the buttons on the first.
function renderWaiting() {
  const now = Date.now() / 1000;
  const rows = state.waiting.flatMap((w) => w.calls.map((c, i) => el("tr", { "data-waiting": w.id },
    el("td", {}, i ? "" : w.reference),  // as the chat's question ends: "(Approval 3f9c2a1b.)"
    el("td", {}, i ? "" : `${duration(now - w.asked_at)} ago`),
    el("td", {}, c.tool),
    el("td", {}, c.server || ""),
    el("td", { class: "wraps" }, el("code", {}, c.arguments)),
    el("td", {}, i ? "" : decision(w)),
  )));
  document.querySelector("#waiting tbody").replaceChildren(...rows);
  document.getElementById("waiting").hidden = rows.length === 0;
  document.getElementById("waiting-none").hidden = rows.length !== 0;
}

function decision(w) {
  if (w.decided) return el("span", { class: w.decided === "approve" ? "ok" : "error" }, DECIDED[w.decided]);
  return el("span", {},
    el("button", { class: "approve", onclick: () => decide(w.id, "approve") }, "Approve"), " ",
    el("button", { class: "deny", onclick: () => decide(w.id, "deny") }, "Deny"));
}

async function decide(id, verdict) {
  try {
    const decided = await json(`/ui/waiting/${encodeURIComponent(id)}`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ verdict }),
    });
    state.waiting = state.waiting.map((w) => (w.id === id ? { ...w, decided: decided.decided } : w));
    renderWaiting();
  } catch (error) {
    alert(`Not decided: ${error.message}`);
    refreshWaiting();
  }
}

// A list of the page read again from its route; a failure leaves it as it was (the next poll tries again).
async function refreshList(key, path, render) {
  try {
    state[key] = (await json(path)).data;
    render();
  } catch { /* the next poll tries again */ }
}

const refreshWaiting = () => refreshList("waiting", "/ui/waiting", renderWaiting);

// A POST of the page's, declared JSON as every change must be; a refusal is shown, and the list read again.
async function act(path, failed, refresh) {
  try {
    await json(path, { method: "POST", headers: { "Content-Type": "application/json" } });
  } catch (error) {
    alert(`${failed}: ${error.message}`);
  }
  refresh();
}

// The servers' skills (app/mcp/skills.py): the tool that loads each, and the slash command a person types.
function renderSkills() {
  const rows = state.skills.map((k) => el("tr", { "data-skill": `${k.server}/${k.name}` },
    el("td", {}, el("code", {}, `/${k.name}`)),
    el("td", {}, k.server),
    el("td", { class: "wraps" }, k.description),
    el("td", {}, k.load_with || "(not offered)"),
  ));
  document.querySelector("#skills tbody").replaceChildren(...rows);
  document.getElementById("skills").hidden = rows.length === 0;
  document.getElementById("skills-none").hidden = rows.length !== 0;
}

const refreshSkills = () => refreshList("skills", "/ui/skills", renderSkills);

// Tools whose definitions changed since they were pinned (app/mcp/trusted.py): the diff, and Accept.
function renderChanges() {
  const items = state.changes.map((c) => el("div", { class: "change", "data-change": `${c.server}/${c.tool}` },
    el("p", {}, el("strong", {}, c.tool), ` on ${c.server} `,
      el("button", { class: "accept", onclick: () => accept(c.server, c.tool) }, "Accept the new definition")),
    el("pre", {}, el("code", {}, c.diff)),
  ));
  document.getElementById("changes").replaceChildren(...items);
  document.getElementById("changes-none").hidden = items.length !== 0;
}

const accept = (server, tool) => act(`/ui/changes/${encodeURIComponent(server)}/${encodeURIComponent(tool)}/accept`,
  "Not accepted", refreshChanges);
const refreshChanges = () => refreshList("changes", "/ui/changes", renderChanges);

// The key's background tasks (app/mcp/tasks.py): what each server last said, and Cancel while one runs.
function renderTasks() {
  const rows = state.tasks.map((t) => el("tr", { "data-task": `${t.server}/${t.task_id}` },
    el("td", {}, t.tool),
    el("td", {}, t.server),
    el("td", { class: t.status === "completed" ? "ok" : t.ended ? "error" : "" }, t.status),
    el("td", { class: "wraps" }, t.message),
    el("td", {}, new Date(t.started * 1000).toLocaleString()),
    el("td", {}, new Date(t.updated * 1000).toLocaleTimeString()),
    el("td", {}, t.ended ? "" : el("button", { class: "cancel", onclick: () => cancelTask(t.server, t.task_id) },
      "Cancel")),
  ));
  document.querySelector("#tasks tbody").replaceChildren(...rows);
  document.getElementById("tasks").hidden = rows.length === 0;
  document.getElementById("tasks-none").hidden = rows.length !== 0;
}

const cancelTask = (server, id) => act(`/ui/tasks/${encodeURIComponent(server)}/${encodeURIComponent(id)}/cancel`,
  "Not cancelled", refreshTasks);
const refreshTasks = () => refreshList("tasks", "/ui/tasks", renderTasks);

// The person's grants (app/chat/asking/grants.py): what each holds, and a button that revokes it.
const HOLDS = { chat: "in one chat", always: "until revoked" };

function renderGrants() {
  const rows = state.grants.map((g) => el("tr", { "data-grant": g.id },
    el("td", { class: g.allow ? "ok" : "error" }, g.allow ? "yes" : "no"),
    el("td", {}, g.tool),
    el("td", {}, g.server),
    el("td", {}, g.scope === "timed" ? `until ${new Date(g.expires * 1000).toLocaleString()}` : HOLDS[g.scope]),
    el("td", {}, g.under ? el("code", {}, g.under) : "any"),
    el("td", {}, new Date(g.made * 1000).toLocaleString()),
    el("td", {}, el("button", { class: "revoke", onclick: () => revoke(g.id) }, "Revoke")),
  ));
  document.querySelector("#grants tbody").replaceChildren(...rows);
  document.getElementById("grants").hidden = rows.length === 0;
  document.getElementById("grants-none").hidden = rows.length !== 0;
}

const revoke = (id) => act(`/ui/grants/${encodeURIComponent(id)}/revoke`, "Not revoked", refreshGrants);
const refreshGrants = () => refreshList("grants", "/ui/grants", renderGrants);

// Where each door's clients connect: the address this page was reached at (the base URL each client asks for).
function renderDoors() {
  const doors = [
    ["Chat Completions", `${location.origin}/v1`, "Open WebUI (OpenAI API), Chatbox, curl, the OpenAI SDK"],
    ["Responses", `${location.origin}/v1`, "the OpenAI SDK's client.responses, the OpenAI Agents SDK, Codex"],
    ["Anthropic Messages", location.origin, "the Anthropic SDK, Claude Code (ANTHROPIC_BASE_URL)"],
    ["Ollama", location.origin, "the ollama library, Open WebUI's Ollama connection"],
  ];
  document.querySelector("#doors tbody").replaceChildren(...doors.map(([name, address, clients]) =>
    el("tr", {}, el("td", {}, name), el("td", {}, el("code", {}, address)), el("td", { class: "wraps" }, clients))));
}

// Which API a request came through (each door's name, app/doors/door.py).
const DOOR_NAMES = { chat: "Chat Completions", responses: "Responses", messages: "Anthropic", ollama: "Ollama" };

// Chat requests and the tools the budget withheld from them (app/recent_requests.py).
function renderRequests() {
  const rows = state.requests.slice().reverse().map((r) => el("tr", { "data-request": r.request_id || "" },
    el("td", {}, new Date(r.at * 1000).toLocaleTimeString()),
    el("td", {}, r.request_id || ""),
    el("td", {}, r.model || ""),
    el("td", {}, DOOR_NAMES[r.door] || r.door || ""),
    el("td", {}, r.tools_offered),
    el("td", { class: r.tools_withheld ? "error" : "", title: r.withheld.join(", ") }, r.tools_withheld),
    el("td", { class: "wraps" }, r.why || ""),
  ));
  document.querySelector("#requests tbody").replaceChildren(...rows);
}

function renderSparklines() {
  const byTool = new Map();
  for (const call of state.calls) {
    if (!call.server) continue;  // a made-up name took no time
    const key = `${call.server} / ${call.tool}`;
    byTool.set(key, [...(byTool.get(key) || []), call.duration_ms].slice(-SPARK_POINTS));
  }
  const lines = [...byTool].map(([tool, values]) => {
    const top = Math.max(...values, 1);
    const drawn = values.length === 1 ? [values[0], values[0]] : values;  // one call: a level line
    const points = drawn.map((v, i) => `${(i / (drawn.length - 1)) * 100},${20 - (v / top) * 18}`);
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("width", "100"); svg.setAttribute("height", "22"); svg.setAttribute("viewBox", "0 0 100 22");
    const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
    line.setAttribute("points", points.join(" ")); line.setAttribute("fill", "none");
    line.setAttribute("stroke", "#2563eb"); line.setAttribute("stroke-width", "1.5");
    svg.append(line);
    return el("div", { class: "spark", title: `last ${values.length} calls, at most ${top} ms` },
      svg, `${tool}: ${values[values.length - 1]} ms`);
  });
  document.getElementById("sparklines").replaceChildren(...lines);
}

// Why the grammar-safe profile (app/mcp/schema.py) changes a keyword: LM Studio and llama.cpp turn the
// schema into a grammar, and reject or blow up on these.
const WHY = {
  $schema: "an annotation grammars reject", $id: "an annotation grammars reject", $comment: "an annotation",
  $ref: "references inlined: grammars cannot follow them", $defs: "inlined where referenced",
  definitions: "inlined where referenced", not: "grammars cannot express it",
  default: "written into the description", examples: "an annotation grammars reject",
  enum: "also written into the description", description: "defaults and choices written into words",
  pattern: "anchored (^...$), or dropped where it uses features grammars lack",
  additionalProperties: "false is dropped: grammars reject it", anyOf: "null alternatives made the plain type",
  oneOf: "null alternatives made the plain type", type: "a list of types with null made the plain type",
  minLength: "huge bounds expand into huge grammars", maxLength: "huge bounds expand into huge grammars",
  minItems: "huge bounds expand into huge grammars", maxItems: "huge bounds expand into huge grammars",
  minimum: "sentinel bounds (2^53 and the like) dropped", maximum: "sentinel bounds (2^53 and the like) dropped",
};

function why(path) {
  const key = path.split(": ")[0].split(".").reverse().find((part) => part in WHY);
  return key ? `${path} (${WHY[key]})` : path;
}

// What the profile changed: every path where the schema the model sees differs from the server's.
function changes(original, converted, path = "") {
  if (JSON.stringify(original) === JSON.stringify(converted)) return [];
  const objects = original && converted && typeof original === "object" && typeof converted === "object";
  if (!objects || Array.isArray(original) !== Array.isArray(converted)) {
    return [`${path || "(schema)"}: ${converted === undefined ? "removed" : "rewritten"}`];
  }
  const keys = new Set([...Object.keys(original), ...Object.keys(converted)]);
  return [...keys].flatMap((key) => {
    const at = path ? `${path}.${key}` : key;
    if (!(key in converted)) return [`${at}: removed`];
    if (!(key in original)) return [`${at}: added`];
    return changes(original[key], converted[key], at);
  });
}

function renderTools() {
  const filter = document.getElementById("tool-filter").value.toLowerCase();
  const shown = state.tools.filter((t) => !filter || JSON.stringify([t.function.name, t.server, t.function.description])
    .toLowerCase().includes(filter));
  document.getElementById("tools").replaceChildren(...shown.map((t) => {
    const notes = t.original_parameters ? changes(t.original_parameters, t.function.parameters) : [];
    return el("details", { "data-tool": t.function.name },
      el("summary", {}, t.function.name, el("span", { class: "server" }, `${t.server} / ${t.tool}`),
        t.asks_first ? el("span", { class: "asks", title: ASKS_FIRST }, "asks first") : ""),
      el("p", {}, t.function.description || ""),
      t.original_description ? el("p", { class: "hint" }, `The server's description: ${t.original_description}`) : "",
      notes.length ? el("p", { class: "changes" }, `Changed for the model: ${notes.map(why).join("; ")}`) : "",
      el("div", { class: "columns" },
        el("div", {}, el("strong", {}, "As the model sees it"),
          el("pre", {}, JSON.stringify(t.function.parameters, null, 2))),
        el("div", {}, el("strong", {}, "As the server sent it"),
          el("pre", {}, JSON.stringify(t.original_parameters ?? "(not a valid schema)", null, 2)))));
  }));
}

function renderPlayground() {
  const select = document.getElementById("play-tool");
  const chosen = select.value;
  select.replaceChildren(...state.tools.map((t) => el("option", { value: t.function.name }, t.function.name)));
  if (chosen) select.value = chosen;
  renderFields();
}

function renderFields() {
  const tool = state.tools.find((t) => t.function.name === document.getElementById("play-tool").value);
  const properties = tool?.function.parameters?.properties || {};
  const required = new Set(tool?.function.parameters?.required || []);
  const fields = Object.entries(properties).map(([name, schema]) => {
    const label = `${name}${required.has(name) ? " *" : ""}`;
    let input;
    if (Array.isArray(schema.enum)) {
      input = el("select", { name }, el("option", { value: "" }, ""),
        ...schema.enum.map((v) => el("option", { value: JSON.stringify(v) }, String(v))));
      input.dataset.kind = "enum";
    } else if (schema.type === "boolean") {
      input = el("input", { name, type: "checkbox" });
      input.dataset.kind = "boolean";
    } else if (schema.type === "integer" || schema.type === "number") {
      input = el("input", { name, type: "number", step: schema.type === "integer" ? "1" : "any" });
      input.dataset.kind = "number";
    } else if (schema.type === "object" || schema.type === "array") {
      input = el("textarea", { name, rows: "3", placeholder: "JSON" });
      input.dataset.kind = "json";
    } else {
      input = el("input", { name, type: "text" });
      input.dataset.kind = "text";
    }
    return el("label", {}, `${label} `, input, el("span", { class: "hint" }, ` ${schema.description || ""}`));
  });
  document.getElementById("play-fields").replaceChildren(...fields);
}

function argumentsFromForm() {
  // Pairs, then fromEntries: assigning args["__proto__"] would set the prototype and drop the argument.
  const pairs = [];
  for (const input of document.querySelectorAll("#play-fields [name]")) {
    const kind = input.dataset.kind;
    if (kind === "boolean") { if (input.checked) pairs.push([input.name, true]); continue; }
    if (input.value === "") continue;
    if (kind === "number") pairs.push([input.name, Number(input.value)]);
    else if (kind === "enum" || kind === "json") pairs.push([input.name, JSON.parse(input.value)]);
    else pairs.push([input.name, input.value]);
  }
  return Object.fromEntries(pairs);
}

async function runPlayground(event) {
  event.preventDefault();
  const out = document.getElementById("play-result");
  try {
    const ran = await json("/ui/playground", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ tool: document.getElementById("play-tool").value, arguments: argumentsFromForm() }),
    });
    let content = ran.content;
    try { content = JSON.stringify(JSON.parse(content), null, 2); } catch { /* text results stay as they are */ }
    out.textContent = content;
    out.className = ran.is_error ? "error" : "ok";
  } catch (error) {
    out.textContent = error.message;
    out.className = "error";
  }
}

async function refreshTools() {
  try {
    state.tools = (await json("/ui/tools")).data;
    renderTools();
    renderPlayground();
  } catch { /* the next change tries again */ }
}

function serversChanged(servers) {
  const count = (all) => Object.values(all).map((s) => `${s.state}:${s.tools}`).join();
  // The catalogue is rebuilt after a server's state changes (app/mcp/rebuilds.py), and says so with another
  // event: tools still listed for a server that is no longer ready are fetched again then.
  const stale = state.tools.some((t) => servers[t.server] && servers[t.server].state !== "ready");
  if (stale || count(servers) !== count(state.servers)) refreshTools();  // a server came, went or changed its tools
  renderServers(servers);
}

function listen() {
  const live = document.getElementById("live");
  const source = new EventSource("/ui/events");
  source.addEventListener("open", () => { live.textContent = "live"; live.className = "badge ok"; });
  source.addEventListener("error", () => { live.textContent = "reconnecting"; live.className = "badge off"; });
  source.addEventListener("servers", (e) => { serversChanged(JSON.parse(e.data)); refreshChanges(); refreshSkills(); });
  source.addEventListener("request", (e) => {
    state.requests = [...state.requests, JSON.parse(e.data)].slice(-100);
    renderRequests();
    refreshWaiting();  // the request may ask the person
    refreshGrants();  // or act on an answer that granted
    refreshTasks();  // or start a background task
  });
  source.addEventListener("call", (e) => {
    state.calls = [...state.calls, JSON.parse(e.data)].slice(-200);
    renderCalls();
  });
}

async function start() {
  renderDoors();
  document.getElementById("tool-filter").addEventListener("input", renderTools);
  document.getElementById("play-tool").addEventListener("change", renderFields);
  document.getElementById("playground").addEventListener("submit", runPlayground);
  const [health, tools, calls] = await Promise.all([json("/ui/health"), json("/ui/tools"), json("/ui/calls")]);
  renderHealth(health);
  renderServers(health.servers || {});
  signedInNotice();
  state.tools = tools.data;
  state.calls = calls.data;
  renderTools();
  renderPlayground();
  renderCalls();
  state.requests = (await json("/ui/requests")).data;
  renderRequests();
  await Promise.all([refreshWaiting(), refreshGrants(), refreshChanges(), refreshSkills(), refreshTasks()]);
  setInterval(refreshWaiting, WAITING_POLL_MS);
  setInterval(refreshTasks, WAITING_POLL_MS);
  setInterval(refreshGrants, WAITING_POLL_MS);  // another replica's or another tab's answers  // a round asked before its request's event, and the time since
  setInterval(refreshHealth, HEALTH_POLL_MS);  // the model server coming and going, which no event tells
  listen();
}

start().catch((error) => {
  const status = document.getElementById("status");
  status.textContent = `error: ${error.message}`;
  status.className = "badge degraded";
});
