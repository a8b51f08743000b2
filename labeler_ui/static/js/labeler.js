// The labeling page: leases a solution, takes ratings from keys or clicks, submits, and
// loads the next one. Data goes into the page only through textContent (see math.js).

import { ApiError, PendingSubmits, getJson, newIdempotencyKey, postJson, postWithRetry } from "./api.js";
import { showsNothing } from "./blank.js";
import { mathAvailable, renderAnswer, renderProblemText, renderStepText } from "./math.js";
import { BAD, GOOD, OKAY, RatingState } from "./ratings.js";
import { Phase1State } from "./phase1_state.js";
import * as phase1View from "./phase1_view.js";
import { Drafts } from "./drafts.js";
import { GuidelinesDialog } from "./guidelines.js";
import { ReasonDialog } from "./reason_dialog.js";
import { ShortcutSetting } from "./shortcut_setting.js";
import { spokenText } from "./spoken.js";
import { watchFootClearance } from "./foot_clearance.js";
import { ActiveTimer, ServerClock, formatDuration } from "./timers.js";
import { TOUCH_ONLY } from "./touch.js";

const config = JSON.parse(document.getElementById("labeler-config").textContent);
// How the API's 403 for a user whose password an admin chose begins (app.deps.PASSWORD_NOT_CHOSEN).
const PASSWORD_NOT_CHOSEN = "an administrator chose your password";
const $ = (id) => document.getElementById(id);
const root = $("labeler");
const stepTemplate = $("step-template");

const RATING_KEYS = { 1: GOOD, 2: OKAY, 3: BAD, "+": GOOD, "=": GOOD, 0: OKAY, "-": BAD };
const RATING_CLASS = { [GOOD]: "good", [OKAY]: "okay", [BAD]: "bad" };
const RATING_TEXT = { [GOOD]: "+1", [OKAY]: "0", [BAD]: "−1" };
const LEASE_WARN_MS = 5 * 60 * 1000;
const EMPTY_RECHECK_MS = 30000;
// A touch screen has no Enter key to name (the stylesheet hides the key hints by the same query).
const SUBMIT_HINT = TOUCH_ONLY ? "Tap Submit." : "Press Enter to submit.";
// A short screen (a laptop at 200% zoom is 640x360) has little room beside a notice: "Saved.",
// shown after every submit, goes sooner there, or a fast labeler would never be without it.
const SHORT_SCREEN = matchMedia("(max-height: 500px)");
const NOTICE_MS = 3500;
const SHORT_NOTICE_MS = 2000;

const serverClock = new ServerClock();
const timer = new ActiveTimer((ms) => {
  $("clock").querySelector("b").textContent = formatDuration(ms);
});
const pending = new PendingSubmits(config.username);
const drafts = new Drafts(config.username);
// A draft belongs to a lease of one solution: an assignment's id alone may come back for another
// solution once a project is deleted (SQLite reuses the ids of the rows deleted last).
const draftKey = (task) => `${task.assignment_id}/${task.solution.id}`;
const reasons = new ReasonDialog((kind, note) => submit(kind, note));
const guidelines = new GuidelinesDialog(config.project.id, config.guidelines ?? null);
// Its sentences name keys: they are written again when it changes.
const shortcuts = new ShortcutSetting(config.username, root, $("single-keys"), () => state && render());
// Set when the page corrects one of the labeler's own labels instead of leasing tasks.
const correction = config.correction ?? null;

let task = null;
let state = null;
let idempotencyKey = null;
let startedAt = null;
let busy = false;
let stepNodes = [];
let leaseWarned = false;
let recheck = null;
let labeledToday = null;
// A key that would change a -1, waiting for the same key again: { index, value }.
let pendingChange = null;
// A skip that would drop ratings given, waiting for a second press.
let skipAsked = false;
// Phase-1 mode: the step whose write-your-own editor is open, or null; and by step, text typed
// in an editor closed without keeping it.
let editing = null;
let unsentSteps = {};
// Another tab saved this solution's ratings while this one could not take them up.
let missedSync = false;

const isPhase1 = () => state instanceof Phase1State;
// A single key named in a sentence, while single keys act and there is a keyboard to press them.
const keyHint = (keys) => (shortcuts.on && !TOUCH_ONLY ? ` (${keys})` : "");

// ---- views and notices ----------------------------------------------------------------------

function setView(view) {
  root.dataset.view = view;
  $("loading-view").hidden = view !== "loading";
  $("task-view").hidden = view !== "task";
  $("empty-view").hidden = view !== "empty";
  for (const id of ["lease", "task-ids"]) $(id).hidden = view !== "task";
  if (correction) $("lease").hidden = true;
}

function showToday() {
  $("today").hidden = labeledToday === null;
  $("today").querySelector("b").textContent = String(labeledToday);
}

async function loadToday() {
  try {
    labeledToday = (await getJson("/api/v1/me/stats")).data.labels_today;
    showToday();
  } catch {
    // Only a counter: the page works without it.
  }
}

function setBusy(value) {
  busy = value;
  root.toggleAttribute("data-busy", value);
  if (state) render();
}

// The notice is a live region that stays on the page, empty and drawn as nothing when there is
// nothing to say (labeler.css): one un-hidden together with its words was often not read out.
// `passing`: it answers the action just taken, and the next action ends it (act); other
// warnings stand while what they warn of lasts.
function notify(kind, text, { passing = kind === "info" } = {}) {
  const notice = $("notice");
  notice.className = `flash ${kind}`;
  notice.classList.toggle("passing", passing);
  notice.textContent = text;
  clearTimeout(notify.timeout);
  if (kind === "success" || kind === "info") {
    notify.timeout = setTimeout(clearNotice, SHORT_SCREEN.matches ? SHORT_NOTICE_MS : NOTICE_MS);
  }
}

function clearNotice() {
  $("notice").textContent = "";
}

function failed(error) {
  if (error instanceof ApiError && error.status === 401) {
    window.location.assign(`/login?next=${encodeURIComponent(window.location.pathname)}&ended=1`);
    return;
  }
  if (error instanceof ApiError && error.status === 403 && error.message.startsWith(PASSWORD_NOT_CHOSEN)) {
    // An admin asked for a new password meanwhile: the page itself now leads to the account page.
    window.location.reload();
    return;
  }
  notify("error", error.message);
}

// A request that got no answer fails with the browser's own words ("Failed to fetch").
const retryNotice = (what) => (error, delayMs) =>
  notify("warning", `${what} Trying again in ${Math.round(delayMs / 1000)} s (${
    error instanceof ApiError ? error.message : "no connection to the server"}).`);

// ---- loading a task -------------------------------------------------------------------------

// `unattended`: the empty queue's recheck, which nobody asked for just then.
async function loadNext({ unattended = false } = {}) {
  clearTimeout(recheck);
  setBusy(true);
  try {
    // The guidelines this page shows: a manager's edit since makes the server lease nothing.
    const shown = encodeURIComponent(config.guidelines?.version ?? "");
    const url = `/api/v1/projects/${config.project.id}/tasks/next?guidelines=${shown}`;
    let retried = false;
    const { data, serverDate } = await postWithRetry(url, undefined, (error, delayMs) => {
      retried = true;
      retryNotice("Cannot reach the server.")(error, delayMs);
    }, { unattended });
    if (retried) clearNotice();
    serverClock.sync(serverDate);
    if (data.task) showTask(data.task);
    else showEmpty(data.waiting, data.reason, { asked: !unattended });
  } catch (error) {
    if (error instanceof ApiError && error.status === 409) {
      // The guidelines changed: the page comes back with the new ones, which open by themselves.
      window.location.reload();
      return;
    }
    failed(error);
  } finally {
    setBusy(false);
  }
}

function showTask(next) {
  task = next;
  leaseSpanMs = Date.parse(task.expires_at) - serverClock.now();
  renewAfter = 0;
  renewedAt = Date.now();
  leaseWarned = false;
  editing = null;
  unsentSteps = {};
  missedSync = false;
  pendingChange = null;
  skipAsked = false;
  state =
    next.labeling_mode === "phase1"
      ? new Phase1State(next.solution.alternatives ?? [])
      : new RatingState(next.labeling_mode, next.solution.steps.length);
  if (correction) state.prefill(correction.ratings);
  const draft = correction ? null : drafts.load(draftKey(next));
  idempotencyKey = draft?.idempotencyKey ?? newIdempotencyKey();
  startedAt = draft?.startedAt ?? new Date(serverClock.now()).toISOString();
  timer.reset();
  if (draft) {
    draft.restore(state);
    timer.activeMs = draft.activeMs;
  }
  renderProblemText($("problem-text"), next.problem.statement, (n) => figureUrl(next.problem.id, n));
  renderAnswer($("answer"), next.problem.answer);
  $("task-ids").textContent = `Solution ${next.solution.id}`;
  stepNodes = isPhase1() ? phase1View.buildSteps(state.alts) : next.solution.steps.map(buildStep);
  $("steps").replaceChildren(...stepNodes);
  shortcuts.apply();
  setView("task");
  render();
  updateLease();
  window.scrollTo({ top: 0 });
  introduce();
}

// A new solution came in silence (the announcement kept the last one's words) with the focus left
// on the page: it is said, and the focus goes to the step to rate, where Tab goes on from.
function introduce() {
  const n = state.n;
  const what = correction ? "Your label to correct" : "New solution";
  announce(`${what}, ${n} step${n === 1 ? "" : "s"}. Problem: ${spokenText($("problem-text"), 160)}`);
  const node = cursorNode();
  if (!node || reasons.isOpen || guidelines.isOpen) return;
  focusStep(node);
  // The page is back at its top, the problem in sight, but at 200% zoom step 1 lay below the
  // screen with the focus on it: it comes up, no further than it must.
  node.scrollIntoView({ block: "nearest" });
}

const figureUrl = (problemId, n) => `/api/v1/problems/${problemId}/figures/${n}`;

// A tall problem scrolls in its panel (labeler.css): then the panel is a stop for Tab, named, and
// ↑ and ↓ scroll it while it has the focus (onKey), as ← and → scroll a wide formula.
const problemPanel = $("problem-text");
const problemScrolls = () => problemPanel.scrollHeight > problemPanel.clientHeight + 1;
new ResizeObserver(() => {
  if (problemScrolls()) {
    problemPanel.tabIndex = 0;
    problemPanel.setAttribute("role", "region");
    problemPanel.setAttribute("aria-label", "Problem statement");
  } else {
    for (const name of ["tabindex", "role", "aria-label"]) problemPanel.removeAttribute(name);
  }
}).observe(problemPanel);

// The side panel scrolls where the screen is too short for it (labeler.css): then it is a stop
// for Tab too, so that the keys' legend at its foot can be scrolled to from the keyboard.
const sidePanel = document.querySelector(".task-side");
const sideObserver = new ResizeObserver(() => {
  if (sidePanel.scrollHeight > sidePanel.clientHeight + 1) sidePanel.tabIndex = 0;
  else sidePanel.removeAttribute("tabindex");
});
sideObserver.observe(sidePanel);
for (const card of sidePanel.children) sideObserver.observe(card);

function buildStep(text, i) {
  const node = stepTemplate.content.firstElementChild.cloneNode(true);
  node.dataset.index = String(i);
  const num = node.querySelector(".step-num");
  num.textContent = String(i + 1);
  num.setAttribute("aria-label", `Go to step ${i + 1}`);
  node.querySelector(".step-controls").setAttribute("aria-label", `Rate step ${i + 1}`);
  renderStepText(node.querySelector(".step-text"), text);
  return node;
}

// `asked`: a labeler's own check, which is answered even when nothing changed.
function showEmpty(waiting, reason, { asked = false } = {}) {
  const again = root.dataset.view === "empty";
  task = null;
  state = null;
  // A labeler held back (screening, a QC pause, retired) is told why, as plain text.
  $("empty-title").textContent = reason ? "No tasks for you here" : "Queue empty";
  $("empty-mark").textContent = reason ? "!" : "✓";
  $("empty-text").textContent = reason
    ? reason
    : waiting
    ? `Nothing is left for you in this project: its ${waiting} open slot${waiting === 1 ? " is" : "s are"} for solutions you have already labeled or skipped, or of problems you reported as bad, and wait${waiting === 1 ? "s" : ""} for other labelers.`
    : "Every solution in this project has the labels it needs. Check back later or choose another project.";
  setView("empty");
  // Said, or a screen reader hears nothing of the solution gone: the announcement of the task
  // view went out of hearing with it. A recheck nobody asked for says nothing new.
  const checked = $("empty-checked");
  if (!again) {
    checked.textContent = "";
    announce(`${$("empty-title").textContent}. ${$("empty-text").textContent}`);
  } else if (asked) {
    const now = new Date();
    // To the second: two checks in one minute read alike, and the second seemed not to have run.
    const time = [now.getHours(), now.getMinutes(), now.getSeconds()].map((n) => String(n).padStart(2, "0")).join(":");
    checked.textContent = `Still nothing to label — checked at ${time}.`;
    announce(checked.textContent);
  }
  // The focus was on the solution, now gone: Enter checks again. A recheck leaves it where the
  // labeler moved it.
  if (!$("empty-view").contains(document.activeElement)) $("check-again").focus({ preventScroll: true });
  recheck = setTimeout(() => loadNext({ unattended: true }), EMPTY_RECHECK_MS);
}

// ---- rendering ------------------------------------------------------------------------------

function render() {
  if (isPhase1()) {
    renderPhase1();
    return;
  }
  stepNodes.forEach((node, i) => renderStep(node, i));
  const complete = state.isComplete();
  const rated = state.ratedCount();
  const errorAt = state.errorIndex();
  const total = state.firstError && errorAt >= 0 ? errorAt + 1 : state.n;
  $("progress").max = Math.max(total, 1);
  $("progress").value = rated;
  $("progress-text").textContent = `${rated} of ${total} step${total === 1 ? "" : "s"} rated`;
  const flagged = state.flaggedCount();
  $("flag-count").textContent = flagged ? `${flagged} flagged` : "";
  $("status").textContent = statusText(complete, errorAt);
  $("finish").hidden = !complete;
  $("finish").classList.toggle("found-error", errorAt >= 0);
  $("finish-text").textContent = complete ? statusText(true, errorAt) : "";
  for (const id of ["submit", "finish-submit"]) $(id).disabled = busy || !complete;
  for (const id of ["flag", "give-up", "bad-problem", "skip"]) $(id).disabled = busy;
  $("undo").disabled = busy || !state.canUndo();
  $("flag").setAttribute("aria-pressed", String(state.flags[state.cursor] ?? false));
}

function renderPhase1() {
  phase1View.renderSteps(state, stepNodes, busy, editing);
  const complete = state.isComplete();
  $("progress").max = Math.max(state.n, 1);
  $("progress").value = state.reach();
  $("progress-text").textContent = `Step ${Math.min(state.reach() + 1, state.n)} of ${state.n} · ${state.ratedCount()}/${state.shownCount()} rated`;
  const flagged = state.flaggedCount();
  $("flag-count").textContent = flagged ? `${flagged} flagged` : "";
  $("status").textContent = phase1Status(complete);
  $("finish").hidden = !complete;
  $("finish").classList.toggle("found-error", complete && state.finishReason() === "found_error");
  $("finish-text").textContent = complete ? phase1Status(true) : "";
  for (const id of ["submit", "finish-submit"]) $(id).disabled = busy || !complete;
  for (const id of ["flag", "give-up", "bad-problem", "skip"]) $(id).disabled = busy;
  $("undo").disabled = busy || !state.canUndo();
  const { step, alt } = state.cursor;
  $("flag").setAttribute("aria-pressed", String(state.flags[step]?.[alt] ?? false));
}

function phase1Status(complete) {
  if (state.n === 0) return "This solution has no steps: give up or report the problem.";
  if (complete && state.finishReason() === "found_error") {
    return `No alternative of step ${state.reach() + 1} is good: the solution ends there. ${SUBMIT_HINT}`;
  }
  if (complete) return `${state.n === 1 ? "The step is" : `All ${state.n} steps`} done. ${SUBMIT_HINT}`;
  // Looked for on the whole path, not only the frontier: a draft saved by an earlier version of
  // this page can hold a step continued with alternatives still unrated.
  const waiting = state.unrated();
  if (waiting) {
    const { step, alt } = waiting;
    const ratings = state.ratings[step];
    const left = ratings.filter((r) => r === null).length;
    const then = state.continues(step) ? "."
      : TOUCH_ONLY ? ", then tap Continue on a good one or Write your own step."
      : `, then continue with a good one (Enter) or write your own${keyHint("W")}.`;
    return `Step ${step + 1}: rate alternative ${phase1View.letter(alt)} (${left} of ${ratings.length} left)${then}`;
  }
  const next = Math.min(state.reach(), state.n - 1) + 1;
  if (TOUCH_ONLY) return `Step ${next}: tap Continue on a good alternative, or Write your own step.`;
  return `Step ${next}: continue with a good alternative (Enter), or write your own step${keyHint("W")}.`;
}

function unratedNotice(i) {
  const alt = phase1View.letter(state.ratings[i].indexOf(null));
  notify("info", `Rate every alternative before continuing: alternative ${alt} of step ${i + 1} is not rated yet.`);
}

function renderStep(node, i) {
  const kind = state.stepState(i);
  const rating = kind === "after_error" ? null : state.ratings[i];
  const current = i === state.cursor && !busy;
  node.className = `step is-${kind.replace("_", "-")}`;
  if (rating !== null) node.classList.add("is-rated", `rated-${RATING_CLASS[rating]}`);
  node.classList.toggle("is-current", current);
  node.classList.toggle("is-flagged", state.flags[i] && kind === "open");
  if (current) node.setAttribute("aria-current", "step");
  else node.removeAttribute("aria-current");
  for (const button of node.querySelectorAll(".rate")) {
    button.setAttribute("aria-pressed", String(rating === Number(button.dataset.rating)));
    button.disabled = kind !== "open" || busy;
  }
  // Without single-key shortcuts each step's number is a Tab stop (shortcut_setting.js), but not
  // a step that cannot be rated yet, or at all: thirty of them after an early first error were
  // thirty stops for nothing.
  node.querySelector(".step-num").tabIndex = !shortcuts.on && kind === "open" ? 0 : -1;
  const flag = node.querySelector(".flag-toggle");
  flag.setAttribute("aria-pressed", String(state.flags[i]));
  flag.disabled = kind !== "open" || busy;
  node.querySelector(".step-note").textContent =
    kind === "after_error" ? "Not rated: it comes after the first error." : state.flags[i] && kind === "open" ? "Flagged as unsure." : "";
}

function statusText(complete, errorAt) {
  if (state.n === 0) return "This solution has no steps: give up or report the problem.";
  if (complete && errorAt >= 0) {
    return state.firstError
      ? `Step ${errorAt + 1} is the first error. ${SUBMIT_HINT}`
      : `All steps rated, with an error. ${SUBMIT_HINT}`;
  }
  if (complete) {
    const rated = state.n === 1 ? "The step is rated" : `All ${state.n} steps rated`;
    return `${rated}, no error. ${SUBMIT_HINT}`;
  }
  if (state.firstError) return `Rate step ${state.reach() + 1} of ${state.n}.`;
  const left = state.ratings.filter((r) => r === null).length;
  return `${left} step${left === 1 ? "" : "s"} left to rate.`;
}

function updateLease() {
  const lease = $("lease");
  if (!task || correction) return;
  const left = Date.parse(task.expires_at) - serverClock.now();
  renewLease(left);
  lease.querySelector("b").textContent = left > 0 ? `${formatDuration(left)} left` : "expired";
  lease.classList.toggle("warn", left > 0 && left < LEASE_WARN_MS);
  lease.classList.toggle("expired", left <= 0);
  lease.title = `Held for you until ${new Date(Date.parse(task.expires_at) - serverClock.offsetMs).toLocaleTimeString()}`;
  if (left <= 0 && !leaseWarned) {
    leaseWarned = true;
    notify("warning", "Your lease on this solution ran out. You can still submit, unless another labeler has taken it meanwhile.");
  }
}

// A labeler at work keeps their solution: once half the lease is gone, the page renews it while
// time on task counts (the tab visible, something done in the last two minutes). An idle tab
// lets it run out, so that the solution goes to someone else. A refused renewal is not asked
// again for a minute; the submit says what became of the task. The lease's length is what the
// server last gave, not the page's setting: a manager may shorten leases while the page is open.
// Rating sends nothing, so on a lease longer than the session may go unused it is renewed sooner,
// at half that time, or the session would end under a labeler at work.
let renewing = false;
let renewAfter = 0;
let leaseSpanMs = 0;
let renewedAt = 0;
const KEEP_ALIVE_MS = config.session_idle_minutes ? config.session_idle_minutes * 30000 : Infinity;

async function renewLease(left) {
  const due = left <= leaseSpanMs / 2 || Date.now() - renewedAt >= KEEP_ALIVE_MS;
  if (renewing || Date.now() < renewAfter || !due || !timer.isActive()) return;
  renewing = true;
  const held = task;
  try {
    const { data, serverDate } = await postJson(`/api/v1/assignments/${held.assignment_id}/renew`);
    serverClock.sync(serverDate);
    renewedAt = Date.now();
    if (task === held) {
      task.expires_at = data.expires_at;
      leaseSpanMs = Date.parse(data.expires_at) - serverClock.now();
      if (leaseWarned) notify("info", "Your lease on this solution was renewed.");
      leaseWarned = false;
      updateLease();
    }
  } catch {
    renewAfter = Date.now() + 60000;
  } finally {
    renewing = false;
  }
}

const reducedMotion = window.matchMedia("(prefers-reduced-motion: reduce)");

// Where a smooth scroll under way will stop. Keys pressed fast land while it runs: a step is
// judged by where it will be then, not where it is passing (judged in passing, a step that looked
// in view was left under the top bar when the scroll before it stopped).
// Without the scrollend event (Safari) a goal could not be forgotten when a wheel takes over, and
// each step is judged where it is, as before.
let scrollGoal = null;
const seesScrollEnd = "onscrollend" in window;
window.addEventListener("scrollend", () => {
  scrollGoal = null;
});

function scrollToY(top, behavior) {
  const goal = Math.max(0, Math.min(top, document.documentElement.scrollHeight - window.innerHeight));
  if (goal === window.scrollY) return;
  if (seesScrollEnd && behavior === "smooth") scrollGoal = goal;
  window.scrollTo({ top: goal, behavior });
}

// The step or alternative under the cursor.
const cursorNode = () => (isPhase1() ? phase1View.rowNode(stepNodes, state.cursor) : stepNodes[state.cursor]);

// A step takes the focus without a scroll of its own: each caller scrolls as it needs to.
function focusStep(node) {
  node.tabIndex = -1;
  node.focus({ preventScroll: true });
}

function focusCurrent() {
  const behavior = reducedMotion.matches ? "auto" : "smooth";
  const node = cursorNode();
  if (!node) return;
  // Rating down a long solution by key, "nearest" kept the current step at the screen's very foot,
  // the steps after it out of sight: once it passes two thirds of the screen it comes up to a
  // third. Going back up, it stops below the sticky top bar (its scroll-margin).
  const ahead = scrollGoal === null ? 0 : scrollGoal - window.scrollY;
  const box = node.getBoundingClientRect();
  const top = box.top - ahead;
  const bottom = box.bottom - ahead;
  const margin = parseFloat(getComputedStyle(node).scrollMarginTop) || 0;
  const from = window.scrollY + ahead;
  // What the sticky finish bar and the notice cover at the foot is no place to stop at. Measured
  // now: the finish bar shown by this very rating is not in the observer's figure yet.
  measureFoot();
  const height = window.innerHeight - (parseFloat(getComputedStyle(document.documentElement).scrollPaddingBottom) || 0);
  if (bottom > (height * 2) / 3 && top > height / 3) {
    scrollToY(from + top - height / 3, behavior);
  } else if (top < margin || bottom - top > height - margin) {
    scrollToY(from + top - margin, behavior);
  } else if (bottom > height) {
    scrollToY(from + bottom - height, behavior);
  }
  // Single keys move the cursor, not the focus: left on step 1, it ended far above the screen,
  // where Tab and a screen reader's cursor went on from. It follows, as the arrows take it to a
  // rating without single keys (focusRating); a control the labeler is using keeps it.
  if (shortcuts.on && followsCursor(document.activeElement)) focusStep(node);
}

// The page itself, or a step or alternative that the focus was left on by the cursor.
const followsCursor = (element) => !element || element === document.body || element.matches(".step, .alt");

// ---- actions --------------------------------------------------------------------------------

// `said`, when given, words what changed for a screen reader: the focus does not follow keys
// that rate and move, so nothing else reads the step or the rating out. Says whether anything
// changed.
function act(change, said = null) {
  if (!change()) return false;
  skipAsked = false;
  // A change made otherwise (a click, a move) ends a −1's change waiting for its second press.
  if (pendingChange) {
    pendingChange = null;
    if ($("notice").classList.contains("warning")) clearNotice();
  }
  if ($("notice").classList.contains("passing")) clearNotice();
  if (!correction) drafts.save(draftKey(task), state, idempotencyKey, startedAt, timer.activeMs);
  render();
  focusCurrent();
  if (said) announce(said());
  return true;
}

function announce(text) {
  const region = $("announce");
  // The same words twice (two steps rated alike) are still a change to read out.
  region.textContent = region.textContent === text ? `${text}\u00a0` : text;
}

function describeCurrent() {
  const i = state.cursor;
  const rating = state.ratings[i];
  const rated = rating === null ? "not rated" : `rated ${RATING_TEXT[rating]}`;
  const text = spokenText(stepNodes[i].querySelector(".step-text"), 300);
  return `Step ${i + 1} of ${state.n}, ${rated}${state.flags[i] ? ", flagged" : ""}: ${text}`;
}

const rate = (i, value) => act(() => state.rate(i, value), () => `Step ${i + 1} rated ${RATING_TEXT[value]}. ${$("status").textContent}`);
const toggleFlag = (i) =>
  act(() => state.toggleFlag(i), () => `Step ${i + 1} ${state.flags[i] ? "flagged as unsure" : "no longer flagged"}.`);
// Nothing to undo is said, not met with silence (a reload, or a correction, starts without a history).
function undo() {
  if (isPhase1()) {
    const before = state.snapshot();
    return act(() => state.undo(), () => `${undoneAlternative(before)} ${$("status").textContent}`) || nothingToUndo();
  }
  const before = { ratings: [...state.ratings], flags: [...state.flags] };
  return act(() => state.undo(), () => `${undone(before)} ${$("status").textContent}`) || nothingToUndo();
}

// Which rating or flag an undo took back: "Undone." alone left the labeler to find it.
function undone(before) {
  const i = state.ratings.findIndex((r, k) => r !== before.ratings[k] || state.flags[k] !== before.flags[k]);
  if (i < 0) return "Undone.";
  const step = `step ${i + 1}`;
  const was = before.ratings[i];
  const now = state.ratings[i];
  if (was !== now) {
    return now === null ? `Undone: ${step}'s ${RATING_TEXT[was]} removed.` : `Undone: ${step}'s ${RATING_TEXT[now]} restored.`;
  }
  return state.flags[i] ? `Undone: ${step} flagged again.` : `Undone: ${step}'s flag removed.`;
}

// Phase 1's undone(): the first step where the undo changed anything, and what there.
function undoneAlternative(before) {
  for (let i = 0; i < state.n; i += 1) {
    const changed = before.ratings[i].findIndex((r, j) => r !== state.ratings[i][j] || before.flags[i][j] !== state.flags[i][j]);
    if (changed >= 0) {
      const name = `step ${i + 1}, alternative ${phase1View.letter(changed)}`;
      const was = before.ratings[i][changed];
      const now = state.ratings[i][changed];
      if (was !== now) {
        return now === null ? `Undone: ${name}'s ${RATING_TEXT[was]} removed.` : `Undone: ${name}'s ${RATING_TEXT[now]} restored.`;
      }
      return state.flags[i][changed] ? `Undone: ${name} flagged again.` : `Undone: ${name}'s flag removed.`;
    }
    if (before.human[i] !== null && JSON.stringify(before.human[i]) !== JSON.stringify(state.human[i])) {
      return state.human[i] === null ? `Undone: your own step ${i + 1} removed.` : `Undone: your own step ${i + 1} restored as it was.`;
    }
    if (before.chosen[i] !== state.chosen[i] && before.chosen[i] !== null) {
      return `Undone: step ${i + 1} no longer continues with alternative ${phase1View.letter(before.chosen[i])}.`;
    }
  }
  return "Undone.";
}

function nothingToUndo() {
  notify("info", "Nothing to undo here.");
  announce("Nothing to undo here.");
}

function rateByKey(key) {
  const i = state.cursor;
  const value = RATING_KEYS[key];
  const confirmed = pendingChange?.index === i && pendingChange.value === value;
  if (state.needsConfirmation(i, value) && !confirmed) {
    pendingChange = { index: i, value };
    notify(
      "warning",
      `Step ${i + 1} is rated −1. Press ${key} again to change it to ${RATING_TEXT[value]}; any other key keeps the −1.`,
    );
    return;
  }
  if (confirmed) clearNotice();
  pendingChange = null;
  rate(i, value);
}

// Undo, asked while a change of a −1 waits for its second press, takes back that first press:
// the −1 stays, as the notice promised any other key would.
function keepPendingError() {
  const i = pendingChange.index;
  pendingChange = null;
  notify("info", `Kept the −1 of step ${i + 1}.`);
}

function moveDown() {
  if (state.atEndingError()) {
    notify(
      "info",
      `Steps after the first error are not rated: step ${state.cursor + 1} is −1 and ends the solution. Press Enter to submit, or change this rating to go on.`,
    );
    return;
  }
  move(1, describeCurrent);
}

// A move that cannot go on (past the first or last step, or to a step waiting for the one above
// it, as every step but the first of a new solution in first-error mode) says where the cursor
// stays, as a move says where it lands: a key is not met with silence.
function move(delta, describe) {
  // Shown too: at 200% zoom a new solution's step 1 lies below the screen, or under the notice.
  if (!act(() => state.moveCursor(delta), describe)) {
    announce(describe());
    focusCurrent();
  }
  if (!shortcuts.on) focusRating();
}

// Without single keys the buttons are what rates: the focus follows the cursor to its step's
// rating, or first button, so that Enter rates the step the arrows came to, not the one left.
function focusRating() {
  const node = cursorNode();
  const buttons = [...(node?.querySelectorAll(".rate:not(:disabled)") ?? [])];
  const button = buttons.find((b) => b.getAttribute("aria-pressed") === "true") ?? buttons[0];
  // The cursor's move scrolls it into view (focusCurrent): a second, sudden scroll would cut in.
  button?.focus({ preventScroll: true });
}

async function submit(reason, note) {
  if (busy || !task) return;
  const finishReason = reason ?? state.finishReason();
  if (!reason && !state.isComplete()) return;
  const assignmentId = task.assignment_id;
  const draft = draftKey(task);
  const url = correction
    ? `/api/v1/me/labels/${correction.label_id}/corrections`
    : `/api/v1/assignments/${assignmentId}/submit`;
  const body = {
    idempotency_key: idempotencyKey,
    ...(isPhase1() ? { alternatives: state.submitted() } : { ratings: state.submittedRatings() }),
    finish_reason: finishReason,
    finish_note: note ?? null,
    total_time_ms: timer.elapsedMs(),
    started_at: startedAt,
  };
  pending.add({ url, body });
  setBusy(true);
  $("status").textContent = "Saving…";
  try {
    const { data: receipt } = await postWithRetry(url, body, retryNotice("Your label is kept and not yet saved."));
    pending.remove(body.idempotency_key);
    if (correction) {
      window.location.assign(`/label/labels/${receipt.label_id}?corrected=1`);
      return;
    }
    if (labeledToday !== null && !receipt.duplicate) labeledToday += 1;
    showToday();
    drafts.clear(draft);
    notify("success", (reason ? `Saved (${reason.replace("_", " ")}).` : "Saved.") + goldNote(receipt.gold));
    await loadNext();
  } catch (error) {
    const signedOut = error instanceof ApiError && error.status === 401;
    const gone = !correction && error instanceof ApiError && (error.status === 404 || error.status === 409);
    if (!signedOut) pending.remove(body.idempotency_key);
    setBusy(false);
    if (gone) {
      // A 404 names the task's id, which this page shows nowhere.
      const why = error.status === 404
        ? "this solution is no longer yours (your lease ran out and another labeler took it, or you were taken out of the project)"
        : error.message;
      notify("warning", `Not saved: ${why}. Loading the next solution.`);
      drafts.clear(draft);
      await loadNext();
    } else if (reason && !signedOut) {
      // Said in the dialog, which gives the reason back: a notice too would say it twice.
      reasons.reopen(reason, note, `Not saved: ${error.message}.`);
    } else if (correction && error instanceof ApiError && !signedOut) {
      notify("error", `Not saved: ${error.message}.`);
    } else {
      failed(error);
    }
  }
}

// Where the project shows it, a check item's receipt carries the reference ratings.
function goldNote(gold) {
  if (!gold) return "";
  const shown = gold.map((r, i) => `${i + 1}: ${r === null ? "–" : r > 0 ? "+1" : r < 0 ? "−1" : "0"}`);
  return ` That was a check item; the reference rated the steps ${shown.join(", ")}.`;
}

async function flushPending() {
  for (const entry of pending.all()) {
    try {
      await postWithRetry(entry.url, entry.body, retryNotice("A label from before is not saved yet."));
      notify("success", "A label from your last visit has been saved.");
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) throw error;
    }
    pending.remove(entry.body.idempotency_key);
  }
}

// ---- input ----------------------------------------------------------------------------------

function onKey(event) {
  if (reasons.isOpen || guidelines.isOpen) return;
  // A closed dialog leaves focus in its hidden text box: keys there are the page's again.
  // The shortcut checkbox takes Space only: the other keys stay the page's.
  const typing = event.target.closest('input:not([type="checkbox"]), textarea, select, [contenteditable]');
  if (typing && !typing.closest("dialog:not([open])")) return;
  const key = event.key;
  const ctrl = event.ctrlKey || event.metaKey;
  if (!shortcuts.on && key.length === 1 && !ctrl && !event.altKey) return;
  if (key === "?" && guidelines.available) {
    event.preventDefault();
    guidelines.open();
    return;
  }
  if (root.dataset.view !== "task" || !state) return;
  if (ctrl && key.toLowerCase() === "z") {
    event.preventDefault();
    if (busy) return;
    if (pendingChange) keepPendingError();
    else undo();
    return;
  }
  if (ctrl || event.altKey) return;
  // The browser's, to scroll a tall problem in focus.
  if ((key === "ArrowUp" || key === "ArrowDown") && problemPanel.contains(event.target) && problemScrolls()) return;
  // A held-down key must not rate step after step, nor, once a rating hands the focus to Submit
  // (followCursor), submit.
  if (event.repeat && !key.startsWith("Arrow")) {
    event.preventDefault();
    return;
  }
  // Enter on a focused link or button is that control's own click.
  if (event.target.closest("a, button") && (key === "Enter" || key === " ")) return;
  const handled = busy ? key === "Enter" : handleKey(key.length === 1 ? key.toLowerCase() : key);
  if (handled) event.preventDefault();
}

function handleKey(key) {
  if (skipAsked && key !== "s") {
    skipAsked = false;
    clearNotice();
  }
  if (key === "ArrowLeft" || key === "ArrowRight") return scrollFormula(key === "ArrowRight" ? 1 : -1);
  if (isPhase1()) return phase1Key(key);
  if (Object.hasOwn(RATING_KEYS, key)) {
    rateByKey(key);
    return true;
  }
  if (pendingChange && key === "u") {
    keepPendingError();
    return true;
  }
  if (!otherKey(key)) return false;
  if (pendingChange) {
    pendingChange = null;
    if ($("notice").classList.contains("warning")) clearNotice();
  }
  return true;
}

// A formula wider than its box scrolls sideways (math.js marks it): ← and → scroll the one in
// focus, else the current step's, so that a labeler on the keyboard reads it to its end before
// rating it. Nothing to scroll: the keys are the browser's.
function scrollFormula(direction) {
  const node = cursorNode();
  const focused = document.activeElement?.closest?.(".katex-display.scrolls");
  const wide = focused ? [focused] : [...(node?.querySelectorAll(".katex-display.scrolls") ?? [])];
  const next = direction > 0 ? wide.find((d) => !d.classList.contains("at-end"))
    : wide.findLast((d) => d.classList.contains("scrolled"));
  if (!next) return false;
  // At once: a smooth scroll begun before the last one ended starts from where that one stood.
  next.scrollBy({ left: direction * next.clientWidth * 0.8, behavior: "instant" });
  return true;
}

function giveUp() {
  reasons.open("give_up", isPhase1() ? null : state.givenUpLoss());
}

// Passes the solution to other labelers, unlabeled (Label Studio's skip, Prodigy's ignore): the
// queue serves it to this labeler no more. Ratings given are dropped, so with any given a second
// press is asked for, as a −1's change is.
async function skip() {
  if (busy || !task || correction) return;
  if (state.ratedCount() > 0 && !skipAsked) {
    skipAsked = true;
    // A phone has no S key to press: the button is what it has.
    const again = TOUCH_ONLY ? "Tap Skip again" : shortcuts.on ? "Press S again" : "Choose Skip again";
    notify("warning", `Skipping drops the ratings you gave this solution. ${again} to skip it; anything else keeps them.`, { passing: true });
    return;
  }
  skipAsked = false;
  // The warning that asked for this second press is answered.
  clearNotice();
  const draft = draftKey(task);
  setBusy(true);
  try {
    await postJson(`/api/v1/assignments/${task.assignment_id}/skip`);
    notify("info", "Skipped: other labelers will label it; it will not come back to you unless you take the skip back on My stats.");
  } catch (error) {
    setBusy(false);
    if (!(error instanceof ApiError) || (error.status !== 404 && error.status !== 409)) {
      failed(error);
      return;
    }
    if (error.status === 409) {
      // A screening question: it stays, with the server's words.
      notify("warning", `Not skipped: ${error.message}.`, { passing: true });
      return;
    }
    notify("warning", "Not skipped: this solution is no longer yours. Loading the next solution.", { passing: true });
  }
  drafts.clear(draft);
  await loadNext();
}

function otherKey(key) {
  if (key === "ArrowUp" || key === "k") move(-1, describeCurrent);
  else if (key === "ArrowDown" || key === "j") moveDown();
  else if (key === "Enter") {
    if (state.isComplete()) submit();
    else notify("info", statusText(false, -1));
  } else if (key === "f") toggleFlag(state.cursor);
  else if (key === "u") undo();
  else if (key === "g") giveUp();
  else if (key === "b") reasons.open("bad_problem");
  else if (key === "s") skip();
  else return false;
  return true;
}

// ---- phase-1 mode --------------------------------------------------------------------------

// What a screen reader hears as the cursor comes to a row: phase 2's describeCurrent.
function describeAlternative() {
  const { step, alt } = state.cursor;
  if (state.onOwnRow()) return `Step ${step + 1}: write your own step (Enter).`;
  const rating = state.ratings[step][alt];
  const rated = rating === null ? "not rated" : `rated ${RATING_TEXT[rating]}`;
  const flagged = state.flags[step]?.[alt] ? ", flagged" : "";
  const text = spokenText(phase1View.rowNode(stepNodes, state.cursor).querySelector(".alt-text"), 300);
  return `Step ${step + 1}, alternative ${phase1View.letter(alt)}, ${rated}${flagged}: ${text}`;
}

// Keys and clicks alike: each change is said to a screen reader, as in phase 2.
const alternativeName = (step, alt) => `Step ${step + 1}, alternative ${phase1View.letter(alt)}`;
const rateAlternative = (step, alt, value) => act(() => state.rate(step, alt, value),
  () => `${alternativeName(step, alt)} rated ${RATING_TEXT[value]}. ${$("status").textContent}`);
const flagAlternative = (step, alt) => act(() => !state.onOwnRow() && state.toggleFlag(step, alt),
  () => `${alternativeName(step, alt)} ${state.flags[step][alt] ? "flagged as unsure" : "no longer flagged"}.`);
const chooseAlternative = (step, alt) => act(() => state.choose(step, alt),
  () => `Continued with alternative ${phase1View.letter(alt)} of step ${step + 1}. ${$("status").textContent}`);

function phase1Key(key) {
  const { step, alt } = state.cursor;
  if (Object.hasOwn(RATING_KEYS, key)) {
    if (state.onOwnRow()) notify("info", "Ratings are for the alternatives: move up to one, or press Enter to write your own step.");
    else rateAlternative(step, alt, RATING_KEYS[key]);
  } else if (key === "ArrowUp" || key === "k") move(-1, describeAlternative);
  else if (key === "ArrowDown" || key === "j") move(1, describeAlternative);
  else if (key === "Enter") phase1Enter();
  else if (key === "w") openEditor(step);
  else if (key === "f") flagAlternative(step, alt);
  else if (key === "u") undo();
  else if (key === "g") giveUp();
  else if (key === "b") reasons.open("bad_problem");
  else if (key === "s") skip();
  else return false;
  return true;
}

// Enter continues with the alternative under the cursor, opens the editor on the
// write-your-own row, and submits a complete label. On the own row of the step where the
// solution ends, every alternative −1 (the last −1 puts the cursor there), Enter submits, as the
// status says, and W writes.
function phase1Enter() {
  const { step, alt } = state.cursor;
  const endsHere = state.isComplete() && state.endsInError() && step === state.reach();
  if (state.onOwnRow() && !endsHere) openEditor(step);
  else if (state.canChoose(step, alt) && state.chosen[step] !== alt) chooseAlternative(step, alt);
  else if (state.isComplete()) submit();
  else if (state.ratings[step][alt] === BAD) notify("info", `A −1 alternative cannot be continued with: choose a good one, or write your own step${keyHint("W")}.`);
  else if (state.ratings[step][alt] === null) notify("info", `Rate this alternative first${keyHint("1, 2 or 3")}.`);
  else if (!state.fullyRated(step)) unratedNotice(step);
  else notify("info", phase1Status(false));
}

function openEditor(i) {
  if (busy || !state.isShown(i)) return;
  if (!state.fullyRated(i)) {
    unratedNotice(i);
    return;
  }
  editing = i;
  state.setCursor(i, state.alts[i].length);
  const input = phase1View.openEditor(
    stepNodes,
    i,
    unsentSteps[i] ?? state.human[i]?.text ?? "",
    (text, rating) => {
      editing = null;
      // First what another tab saved meanwhile, or this step's save would write over it.
      catchUpWithOtherTab();
      // The undo button, clicked while the editor is open, can take a rating back.
      if (state.canContinue(i)) {
        delete unsentSteps[i];
        act(() => state.write(i, text, rating),
          () => `Step ${i + 1}: continued with your own step, rated ${RATING_TEXT[rating]}. ${$("status").textContent}`);
      } else {
        unsentSteps[i] = text;
        render();
        unratedNotice(i);
      }
    },
    (typed) => {
      editing = null;
      // Closed, not thrown away: opening it again brings the text back.
      if (!showsNothing(typed)) unsentSteps[i] = typed;
      else delete unsentSteps[i];
      render();
      catchUpWithOtherTab();
    },
  );
  render();
  input.focus();
}

function onPhase1Click(event) {
  const hit = phase1View.clickTarget(event.target);
  if (!hit || busy) return;
  if (event.detail > 0) event.target.closest("button")?.blur();
  if (hit.action === "rate") followCursor(event, rateAlternative(hit.step, hit.alt, hit.rating));
  else if (hit.action === "flag") flagAlternative(hit.step, hit.alt);
  else if (hit.action === "choose") followCursor(event, chooseAlternative(hit.step, hit.alt));
  else if (hit.action === "write") openEditor(hit.step);
  else if (!window.getSelection()?.toString()) act(() => state.setCursor(hit.step, hit.alt));
}

function onStepClick(event) {
  if (isPhase1()) {
    onPhase1Click(event);
    return;
  }
  const node = event.target.closest(".step");
  if (!node || busy || !state) return;
  const i = Number(node.dataset.index);
  const button = event.target.closest("button");
  // After a pointer's click focus leaves the button, so that Enter afterwards submits instead of
  // clicking again; a keyboard's activation (detail 0) keeps it where the user is, unless a
  // rating moves it on with the cursor (followCursor).
  if (event.detail > 0) button?.blur();
  if (button?.classList.contains("rate")) followCursor(event, rate(i, Number(button.dataset.rating)));
  else if (button?.classList.contains("flag-toggle")) toggleFlag(i);
  else if (!window.getSelection()?.toString()) act(() => state.setCursor(i));
}

// A rating or choice made on its button moves the cursor on, to what is left to rate, and the focus
// goes with it: left on the button, it had ↓ and ↑ go on from a cursor out of sight, and a screen
// reader stay on the step done. From the keyboard it goes to the new step's rating, the buttons
// being what rates without single keys, or, once the solution is complete, to Submit: "Press
// Enter to submit", the status says, and on the button Enter would only rate again (↑ or Shift
// Tab go back to change a rating; each change comes back here). A pointer's click hands it to the
// step, where Enter submits.
function followCursor(event, changed) {
  if (!changed) return;
  const keyboard = event.detail === 0;
  if (keyboard && state.isComplete()) $("finish-submit").focus();
  else if (keyboard && !shortcuts.on) focusRating();
  else focusStep(cursorNode());
}

function onButton(id, handler) {
  $(id).addEventListener("click", (event) => {
    if (event.detail > 0) event.currentTarget.blur();
    handler();
  });
}

document.addEventListener("keydown", onKey);
$("steps").addEventListener("click", onStepClick);
onButton("submit", () => submit());
onButton("finish-submit", () => submit());
onButton("flag", () => {
  if (!state) return;
  if (isPhase1()) flagAlternative(state.cursor.step, state.cursor.alt);
  else toggleFlag(state.cursor);
});
onButton("undo", () => state && (pendingChange ? keepPendingError() : undo()));
onButton("give-up", () => task && !busy && giveUp());
onButton("bad-problem", () => task && !busy && reasons.open("bad_problem"));
onButton("skip", () => skip());
onButton("check-again", () => loadNext());
setInterval(updateLease, 1000);
// A page the browser kept in memory comes back as it was left: a lease since expired, or a label
// since corrected. Loaded anew, it asks the server (drafts are kept in local storage).
window.addEventListener("pageshow", (event) => {
  if (event.persisted) location.reload();
});
window.addEventListener("storage", (event) => {
  if (event.key === drafts.key) followOtherTab(event.oldValue, event.newValue);
});
$("reason-dialog").addEventListener("close", () => catchUpWithOtherTab());

function catchUpWithOtherTab() {
  if (!missedSync) return;
  missedSync = false;
  let saved = null;
  try {
    saved = localStorage.getItem(drafts.key);
  } catch {
    return;
  }
  followOtherTab(null, saved);
}

// A second tab of one project holds the same lease, so it shows the same solution. Each tab
// takes up what the other saved (the storage event: the other tab's save), so that both show
// and submit the last ratings made in either, under one idempotency key: the second submit is
// then the first's duplicate, not a conflict. A draft gone means the other tab sent the label.
function followOtherTab(oldValue, newValue) {
  if (!task || correction) return;
  if (busy || editing !== null || reasons.isOpen) {
    // Taken up once the labeler is done here: a task changed under an open reason dialog would
    // take the reason to the next solution.
    missedSync = true;
    return;
  }
  const key = draftKey(task);
  const held = (value) => {
    try {
      return Object.hasOwn(JSON.parse(value ?? "{}") ?? {}, key);
    } catch {
      return false;
    }
  };
  if (!held(newValue)) {
    // Another project's tab saving its own draft says nothing about this one.
    if (!held(oldValue)) return;
    notify("info", "This solution was sent from another tab. Loading the next one.");
    loadNext();
    return;
  }
  const draft = drafts.load(key);
  if (!draft) return;
  idempotencyKey = draft.idempotencyKey;
  startedAt = draft.startedAt;
  const progress = () => JSON.stringify(isPhase1() ? { ...state.snapshot(), cursor: null } : [state.ratings, state.flags]);
  const before = progress();
  const cursor = state.cursor;
  draft.restore(state);
  if (progress() === before) {
    state.cursor = cursor;
    return;
  }
  pendingChange = null;
  render();
  notify("info", "Ratings made in another tab of this solution are shown here too.");
}

if (!mathAvailable()) {
  notify("warning", "Math rendering is not installed on this server (python -m labeler_ui.vendor_assets): formulas show as LaTeX source.");
}
setView("loading");
const measureFoot = watchFootClearance($("finish"), $("notice"));
// A new labeler reads the guidelines before a task is leased: reading them is not time on task.
if (correction) serverClock.sync(correction.server_ms);
const start = correction ? () => showTask(correction.task) : () => guidelines.showUnread().then(() => loadNext());
flushPending().then(start, failed);
loadToday();
