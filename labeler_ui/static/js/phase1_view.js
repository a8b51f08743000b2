// Phase-1 mode's steps on the page: each step a list of its alternatives, then a row to write
// one's own step. Text goes in through renderStepText only (text and math, never markup).

import { showsNothing } from "./blank.js";
import { renderStepText } from "./math.js";
import { TOUCH_ONLY } from "./touch.js";

const RATING_CLASS = { 1: "good", 0: "okay", [-1]: "bad" };
const LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
export const letter = (j) => LETTERS[j] ?? String(j + 1);

function fromTemplate(id) {
  return document.getElementById(id).content.firstElementChild.cloneNode(true);
}

export function buildSteps(alternatives) {
  return alternatives.map((texts, i) => {
    const node = fromTemplate("p1-step-template");
    node.dataset.index = String(i);
    node.querySelector(".step-num").textContent = String(i + 1);
    const rows = texts.map((text, j) => {
      const row = fromTemplate("p1-alt-template");
      row.dataset.alt = String(j);
      row.querySelector(".alt-letter").textContent = letter(j);
      row.querySelector(".step-controls").setAttribute("aria-label", `Rate step ${i + 1}, alternative ${letter(j)}`);
      renderStepText(row.querySelector(".alt-text"), text);
      return row;
    });
    const own = fromTemplate("p1-own-template");
    own.dataset.alt = String(texts.length);
    node.querySelector(".alts").replaceChildren(...rows, own);
    return node;
  });
}

// The row a click landed on, and what on it: { step, alt, action, rating }.
export function clickTarget(target) {
  const row = target.closest(".alt");
  const step = target.closest(".p1-step");
  if (!row || !step) return null;
  const button = target.closest("button");
  const found = { step: Number(step.dataset.index), alt: Number(row.dataset.alt), action: "focus" };
  if (button?.classList.contains("rate")) return { ...found, action: "rate", rating: Number(button.dataset.rating) };
  if (button?.classList.contains("flag-toggle")) return { ...found, action: "flag" };
  if (button?.classList.contains("choose")) return { ...found, action: "choose" };
  if (button?.classList.contains("own-open")) return { ...found, action: "write" };
  if (target.closest(".own-editor")) return null;
  return found;
}

export function rowNode(nodes, cursor) {
  return nodes[cursor.step]?.querySelectorAll(".alt")[cursor.alt] ?? null;
}

export function renderSteps(state, nodes, busy, editing) {
  const shown = state.shownSteps();
  nodes.forEach((node, i) => {
    node.hidden = i >= shown;
    if (i >= shown) return;
    const path = pathRating(state, i);
    node.className = "step p1-step";
    if (path !== null) node.classList.add("is-rated", `rated-${RATING_CLASS[path]}`);
    node.classList.toggle("is-current", state.cursor.step === i && !busy);
    node.querySelectorAll(".alt:not(.own)").forEach((row, j) => renderAlternative(state, row, i, j, busy));
    renderOwn(state, node.querySelector(".alt.own"), i, busy, editing === i);
    node.querySelector(".step-note").textContent = stepNote(state, i);
  });
}

// The rating of the step the path took here; -1 on a frontier where nothing was good.
function pathRating(state, i) {
  if (state.chosen[i] !== null) return state.ratings[i][state.chosen[i]];
  if (state.human[i] !== null) return state.human[i].rating;
  return i === state.reach() && state.endsInError() ? -1 : null;
}

function renderAlternative(state, row, i, j, busy) {
  const rating = state.ratings[i][j];
  const chosen = state.chosen[i] === j;
  const current = state.cursor.step === i && state.cursor.alt === j && !busy;
  row.className = "alt";
  if (rating !== null) row.classList.add("is-rated", `rated-${RATING_CLASS[rating]}`);
  row.classList.toggle("is-chosen", chosen);
  row.classList.toggle("is-current", current);
  row.classList.toggle("is-flagged", state.flags[i][j]);
  if (current) row.setAttribute("aria-current", "true");
  else row.removeAttribute("aria-current");
  for (const button of row.querySelectorAll(".rate")) {
    button.setAttribute("aria-pressed", String(rating === Number(button.dataset.rating)));
    button.disabled = busy;
  }
  const flag = row.querySelector(".flag-toggle");
  flag.setAttribute("aria-pressed", String(state.flags[i][j]));
  flag.disabled = busy;
  const choose = row.querySelector(".choose");
  choose.disabled = busy || !state.canChoose(i, j);
  choose.setAttribute("aria-pressed", String(chosen));
  choose.querySelector(".choose-label").textContent = chosen ? "Chosen" : "Continue";
}

function renderOwn(state, row, i, busy, editing) {
  const human = state.human[i];
  const current = state.cursor.step === i && state.onOwnRow() && !busy;
  row.className = "alt own";
  row.classList.toggle("is-current", current);
  row.classList.toggle("is-chosen", human !== null);
  if (human) row.classList.add("is-rated", `rated-${RATING_CLASS[human.rating]}`);
  if (current) row.setAttribute("aria-current", "true");
  else row.removeAttribute("aria-current");
  const text = row.querySelector(".own-text");
  if (text.dataset.shown !== (human?.text ?? "")) {
    text.dataset.shown = human?.text ?? "";
    if (human) renderStepText(text, human.text);
    else text.replaceChildren();
  }
  text.hidden = !human || editing;
  row.querySelector(".own-rating").textContent = human ? (human.rating === 1 ? "+1" : "0") : "";
  row.querySelector(".own-rating").hidden = !human || editing;
  const open = row.querySelector(".own-open");
  open.hidden = editing;
  open.disabled = busy;
  open.querySelector(".own-open-label").textContent = human ? "Rewrite your step" : "Write your own step";
  row.querySelector(".own-editor").hidden = !editing;
}

function stepNote(state, i) {
  if (i !== state.reach()) return "";
  // On a touch screen the buttons are named, not keys it has not got.
  if (state.endsInError()) {
    return TOUCH_ONLY ? "No alternative is good: tap Write your own step, or Submit: the solution ends here."
      : "No alternative is good: write your own step (W), or submit: the solution ends here.";
  }
  if (state.fullyRated(i)) {
    return TOUCH_ONLY ? "Tap Continue on a good alternative, or Write your own step."
      : "Continue with a good alternative (Enter), or write your own step (W).";
  }
  return "";
}

// Opens step i's editor with its text so far; `save(text, rating)` and `close(typed)` as the
// labeler decides. Ctrl+Enter keeps the step as +1, Esc closes.
export function openEditor(nodes, i, initial, save, close) {
  const editor = nodes[i].querySelector(".own-editor");
  const input = editor.querySelector("textarea");
  const error = editor.querySelector(".own-error");
  input.value = initial;
  error.hidden = true;
  input.oninput = () => (error.hidden = true);
  const keep = (rating) => {
    if (showsNothing(input.value)) {
      error.hidden = false;
      input.focus();
      return;
    }
    // Blurred here, not when the hidden editor loses focus at the next frame: a key typed
    // straight after Ctrl+Enter belongs to the page (rating the next step), not the textarea.
    input.blur();
    save(input.value.trim(), rating);
  };
  const cancel = () => {
    input.blur();
    close(input.value);
  };
  editor.onkeydown = (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      keep(1);
    } else if (event.key === "Escape") {
      event.preventDefault();
      cancel();
    }
  };
  editor.onclick = (event) => {
    const button = event.target.closest("button");
    if (!button) return;
    if (button.classList.contains("own-cancel")) cancel();
    else if (button.dataset.rating) keep(Number(button.dataset.rating));
  };
  return input;
}
