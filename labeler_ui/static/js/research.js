// Research pages: keep active rounds' progress bars and waiting comparisons live, and render the
// math in picks. Progress comes from GET /api/v1/rounds/{id}; when a round ends the page reloads
// once, so that its metrics, model version and picks appear. A comparison is followed the same way.

import { ApiError, getJson } from "./api.js";
import { mathAvailable, renderInlineAnswer, renderProblemText, renderStepText } from "./math.js";

const POLL_MS = 2000;
const ENDED = new Set(["done", "failed", "cancelled"]);
const BADGE = { done: "good", failed: "bad", cancelled: "warn", running: "accent", queued: "accent" };

function setText(root, field, text) {
  const element = root.querySelector(`[data-field="${field}"]`);
  if (element) element.textContent = text;
}

function etaText(round) {
  if (round.status === "queued" && round.retry_at) {
    // A worker claims it once due; until one looks (every few seconds) it is due already.
    const retry = new Date(round.retry_at);
    const words = retry < Date.now() ? "next try due since" : "next try at";
    return `· ${words} ${retry.toISOString().slice(11, 19)} UTC`;
  }
  if (round.status === "running" && round.status_text !== "running" && round.lease_expires_at) {
    // Stalled: its worker stopped renewing its hold, and any worker that runs takes it over.
    const lost = new Date(round.lease_expires_at).toISOString().slice(11, 19);
    return `· its worker stopped answering at ${lost} UTC; a worker takes it over once one runs`;
  }
  if (round.status !== "running" || !round.eta_at) return "";
  const eta = new Date(round.eta_at);
  // The estimate extrapolates the pace so far; a slower stage can overrun it.
  const words = eta < Date.now() ? "past its estimate of" : "done about";
  return `· ${words} ${eta.toISOString().slice(11, 19)} UTC`;
}

function show(container, round) {
  container.querySelector("progress").value = round.percent;
  // Rounded down, as the page renders it: 100% only once the round is through.
  setText(container, "percent", `${Math.floor(round.percent + 1e-9)}%`);
  setText(container, "stage", !round.attempts ? "not started" : round.stage);
  setText(container, "eta", etaText(round));
  setText(container, "message", round.message);
  const row = container.closest("[data-round]") ?? document;
  const badge = row.querySelector('[data-field="status"]');
  if (badge) {
    badge.textContent = round.status_text;
    const kind = round.status_text === round.status ? BADGE[round.status] : "warn";
    badge.className = `badge ${kind ?? ""}`;
  }
}

// Set once the researcher types in a form on the page (settings, the compare form).
let edited = false;
document.addEventListener("input", (event) => {
  if (event.target.closest("form")) edited = true;
});

// Set once a form on the page is posted: its answer is on the way, and a reload now would abort
// it (a cancelled round's poll saw the end before the cancel's own page came).
let posted = false;
window.addEventListener("submit", (event) => {
  // On window, after confirm_action.js's listener on document, which holds back what it asks
  // about. Its dialog's own buttons submit a method="dialog" form, which posts nothing.
  if (!event.defaultPrevented && event.target.method !== "dialog") posted = true;
});

// The banners that said "queued", "saved" or "compared" belong to the moment they were shown.
// The address is rewritten in place and then reloaded: navigating to an address that differs only
// in its #fragment would merely scroll.
function reloadWithoutNotices(fragment) {
  if (posted) return;
  if (edited) {
    // A reload would throw away what the researcher is typing; the badge already says it ended.
    document.querySelectorAll("[data-reload-hint]").forEach((hint) => {
      hint.hidden = false;
    });
    return;
  }
  // The address holds no notice by now (page_address.js took it out on load).
  if (fragment) {
    const url = new URL(window.location.href);
    url.hash = fragment;
    window.history.replaceState(null, "", url.toString());
  }
  window.location.reload();
}

// Polls `path` until `seen` returns true. A missed poll (server restarting, network blip) is
// retried on the next tick.
function poll(path, seen) {
  const tick = async () => {
    try {
      const { data } = await getJson(path, { unattended: true });
      if (seen(data)) return;
    } catch (error) {
      // The session ended (unused, say): the page, reloaded, says so and asks for the login.
      if (error instanceof ApiError && error.status === 401) {
        window.location.reload();
        return;
      }
      // Anything else is retried below.
    }
    window.setTimeout(tick, POLL_MS);
  };
  window.setTimeout(tick, POLL_MS / 2);
}

document.querySelectorAll("[data-live-round]").forEach((container) => {
  poll(`/api/v1/rounds/${container.dataset.liveRound}`, (round) => {
    show(container, round);
    if (!ENDED.has(round.status)) return false;
    window.setTimeout(() => reloadWithoutNotices(), 800);
    return true;
  });
});

// A comparison waits for a worker; once it is done or failed, the page reloads at the
// comparisons to show its table or its reason.
document.querySelectorAll("[data-live-comparison]").forEach((container) => {
  poll(`/api/v1/model-comparisons/${container.dataset.liveComparison}`, (comparison) => {
    setText(container, "status", comparison.status);
    if (comparison.status !== "done" && comparison.status !== "failed") return false;
    window.setTimeout(() => reloadWithoutNotices("comparisons"), 800);
    return true;
  });
});

if (mathAvailable()) {
  document.querySelectorAll(".math-text.problem").forEach((element) => {
    const problemId = element.dataset.problemId;
    renderProblemText(element, element.textContent, (n) => `/api/v1/problems/${problemId}/figures/${n}`);
  });
  document.querySelectorAll(".math-text.step-text").forEach((element) => {
    renderStepText(element, element.textContent);
  });
  document.querySelectorAll(".answer-math").forEach((element) => {
    renderInlineAnswer(element, element.textContent);
  });
}
