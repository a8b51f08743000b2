// Phase-1 mode (PRM800K phase 1) without the DOM: each step comes with alternatives; the
// labeler rates every one, then continues with a good one (chosen) or with a step of their own
// (human). The path grows a step at a time: the step after the last continued one is the
// frontier, and the steps beyond it wait. A frontier whose alternatives are all -1 ends the
// solution there (found_error), unless the labeler writes a step of their own.
//
// The cursor is a row: an alternative of a shown step, or (alt === its count) the step's
// write-your-own row.

import { showsNothing } from "./blank.js";
import { BAD, GOOD, OKAY } from "./ratings.js";

export class Phase1State {
  constructor(alternatives) {
    this.alts = alternatives;
    this.n = alternatives.length;
    this.ratings = alternatives.map((a) => a.map(() => null));
    this.flags = alternatives.map((a) => a.map(() => false));
    this.chosen = alternatives.map(() => null);
    this.human = alternatives.map(() => null);
    this.cursor = { step: 0, alt: 0 };
    this.history = [];
  }

  continues(i) {
    return this.chosen[i] !== null || this.human[i] !== null;
  }

  // The frontier: the first step not continued (n when all are).
  reach() {
    let i = 0;
    while (i < this.n && this.continues(i)) i += 1;
    return i;
  }

  shownSteps() {
    return Math.min(this.reach() + 1, this.n);
  }

  fullyRated(i) {
    return this.ratings[i].every((r) => r !== null);
  }

  // The first alternative on the path so far still waiting for a rating: { step, alt } or null.
  unrated() {
    for (let i = 0; i < this.shownSteps(); i += 1) {
      const alt = this.ratings[i].indexOf(null);
      if (alt >= 0) return { step: i, alt };
    }
    return null;
  }

  // PRM800K's phase 1 rates every alternative of a step before the step is continued; a label
  // sends only the steps rated through, so a step continued sooner could never be submitted.
  canContinue(i) {
    return this.isShown(i) && this.fullyRated(i);
  }

  endsInError() {
    const i = this.reach();
    return i < this.n && this.ratings[i].length > 0 && this.ratings[i].every((r) => r === BAD);
  }

  // The steps a label sends: rated through, each but the last continued.
  sentSteps() {
    let k = 0;
    while (k < this.n && this.fullyRated(k)) {
      k += 1;
      if (!this.continues(k - 1)) break;
    }
    return k;
  }

  isComplete() {
    if (this.n === 0) return false;
    const k = this.sentSteps();
    return this.reach() === this.n ? k === this.n : k === this.reach() + 1 && this.endsInError();
  }

  finishReason() {
    return this.reach() === this.n ? "solution" : "found_error";
  }

  submitted() {
    const out = [];
    for (let i = 0; i < this.sentSteps(); i += 1) {
      const step = { ratings: this.ratings[i].map((rating, j) => ({ rating, flagged: this.flags[i][j] })) };
      if (this.chosen[i] !== null) step.chosen = this.chosen[i];
      if (this.human[i] !== null) step.human = { ...this.human[i] };
      out.push(step);
    }
    return out;
  }

  ratedCount() {
    let rated = 0;
    for (let i = 0; i < this.shownSteps(); i += 1) rated += this.ratings[i].filter((r) => r !== null).length;
    return rated;
  }

  shownCount() {
    let total = 0;
    for (let i = 0; i < this.shownSteps(); i += 1) total += this.alts[i].length;
    return total;
  }

  flaggedCount() {
    return this.flags.slice(0, this.shownSteps()).flat().filter(Boolean).length;
  }

  onOwnRow() {
    return this.cursor.alt === this.alts[this.cursor.step].length;
  }

  rate(i, j, value) {
    if (!this.isShown(i) || j >= this.alts[i].length) return false;
    // As in phase 2: the same rating again leaves nothing for undo to take back.
    if (this.ratings[i][j] !== value) {
      this.remember();
      this.ratings[i][j] = value;
      if (this.chosen[i] === j && value === BAD) this.chosen[i] = null;
    }
    this.cursor = { step: i, alt: this.nextRow(i, j) };
    return true;
  }

  // Where to go after a rating: the next alternative waiting for one; when none waits, the
  // best one to continue with, or, when all are -1, the write-your-own row.
  nextRow(i, j) {
    const ratings = this.ratings[i];
    for (let k = 1; k <= ratings.length; k += 1) {
      const next = (j + k) % ratings.length;
      if (ratings[next] === null) return next;
    }
    if (this.continues(i)) return j;
    const best = [GOOD, OKAY].map((r) => ratings.indexOf(r)).find((k) => k >= 0);
    return best ?? ratings.length;
  }

  // Only an alternative rated +1 or 0 can be continued with.
  canChoose(i, j) {
    const rating = this.ratings[i]?.[j];
    return this.canContinue(i) && (rating === GOOD || rating === OKAY);
  }

  choose(i, j) {
    if (!this.canChoose(i, j) || this.chosen[i] === j) return false;
    this.remember();
    this.chosen[i] = j;
    this.human[i] = null;
    this.advanceFrom(i);
    return true;
  }

  write(i, text, rating) {
    if (!this.canContinue(i) || showsNothing(text)) return false;
    this.remember();
    this.human[i] = { text, rating };
    this.chosen[i] = null;
    this.advanceFrom(i);
    return true;
  }

  advanceFrom(i) {
    const reach = this.reach();
    if (reach < this.n) {
      const waiting = this.ratings[reach].indexOf(null);
      this.cursor = { step: reach, alt: waiting >= 0 ? waiting : 0 };
    } else this.cursor = { step: i, alt: this.chosen[i] ?? this.alts[i].length };
  }

  toggleFlag(i, j) {
    if (!this.isShown(i) || j >= this.alts[i].length) return false;
    this.remember();
    this.flags[i][j] = !this.flags[i][j];
    return true;
  }

  isShown(i) {
    return i >= 0 && i < this.shownSteps();
  }

  rows() {
    const rows = [];
    for (let i = 0; i < this.shownSteps(); i += 1) {
      for (let j = 0; j <= this.alts[i].length; j += 1) rows.push({ step: i, alt: j });
    }
    return rows;
  }

  moveCursor(delta) {
    const rows = this.rows();
    const at = rows.findIndex((r) => r.step === this.cursor.step && r.alt === this.cursor.alt);
    const next = rows[Math.max(0, Math.min(rows.length - 1, at + delta))];
    if (!next || (next.step === this.cursor.step && next.alt === this.cursor.alt)) return false;
    this.cursor = next;
    return true;
  }

  setCursor(i, j) {
    if (!this.isShown(i) || j > this.alts[i].length) return false;
    this.cursor = { step: i, alt: j };
    return true;
  }

  snapshot() {
    return structuredClone({
      ratings: this.ratings,
      flags: this.flags,
      chosen: this.chosen,
      human: this.human,
      cursor: this.cursor,
    });
  }

  // A draft saved for the same task; anything that does not fit it is left out.
  restore(saved) {
    const fits = (rows, ok) =>
      Array.isArray(rows) && rows.length === this.n && rows.every((r, i) => ok(r, i));
    const valid = (r) => r === null || r === BAD || r === OKAY || r === GOOD;
    if (!fits(saved?.ratings, (r, i) => Array.isArray(r) && r.length === this.alts[i].length && r.every(valid))) return;
    if (!fits(saved.flags, (f, i) => Array.isArray(f) && f.length === this.alts[i].length)) return;
    if (!fits(saved.chosen, (c, i) => c === null || (Number.isInteger(c) && c >= 0 && c < this.alts[i].length))) return;
    if (!fits(saved.human, (h) => h === null || (typeof h?.text === "string" && (h.rating === GOOD || h.rating === OKAY)))) return;
    this.ratings = saved.ratings;
    this.flags = saved.flags.map((f) => f.map(Boolean));
    this.chosen = saved.chosen;
    this.human = saved.human.map((h) => (h ? { text: h.text, rating: h.rating } : null));
    this.cursor = this.unrated() ?? { step: Math.min(this.reach(), this.n - 1), alt: 0 };
  }

  undo() {
    const last = this.history.pop();
    if (!last) return false;
    Object.assign(this, last);
    return true;
  }

  canUndo() {
    return this.history.length > 0;
  }

  remember() {
    this.history.push(this.snapshot());
  }
}
