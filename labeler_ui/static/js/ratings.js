// The ratings of one solution and the rules of the two labeling modes; no DOM in here.
//
// first_error (PRM800K phase 2): steps are rated top to bottom; the first -1 ends the
// solution, and the steps after it are not rateable. Ratings given to later steps before an
// earlier step was changed to -1 are kept aside, so changing that -1 back re-opens them as
// they were. full: every step is rated, in any order.

export const GOOD = 1;
export const OKAY = 0;
export const BAD = -1;

export class RatingState {
  constructor(mode, stepCount) {
    this.mode = mode;
    this.n = stepCount;
    this.ratings = new Array(stepCount).fill(null);
    this.flags = new Array(stepCount).fill(false);
    this.cursor = 0;
    this.history = [];
  }

  get firstError() {
    return this.mode === "first_error";
  }

  // first_error: the first step that is not rated good or okay (n when all are).
  reach() {
    let i = 0;
    while (i < this.n && this.ratings[i] !== null && this.ratings[i] !== BAD) i += 1;
    return i;
  }

  // "open" steps can be rated; "locked" ones wait for the steps above them; "after_error"
  // ones follow the first -1 and are not part of this label.
  stepState(i) {
    if (!this.firstError) return "open";
    const reach = this.reach();
    if (i <= reach) return "open";
    return this.ratings[reach] === BAD ? "after_error" : "locked";
  }

  lastOpen() {
    return this.firstError ? Math.min(this.reach(), this.n - 1) : this.n - 1;
  }

  errorIndex() {
    if (this.firstError) {
      const reach = this.reach();
      return reach < this.n && this.ratings[reach] === BAD ? reach : -1;
    }
    return this.ratings.indexOf(BAD);
  }

  isComplete() {
    if (this.n === 0) return false;
    if (this.firstError) return this.errorIndex() >= 0 || this.reach() === this.n;
    return this.ratings.every((r) => r !== null);
  }

  finishReason() {
    return this.errorIndex() >= 0 ? "found_error" : "solution";
  }

  // Full mode rates in any order: every rated step counts, where a label records them from the top.
  ratedCount() {
    return this.firstError ? this.submittedRatings().length : this.ratings.filter((r) => r !== null).length;
  }

  // What a label records: the rated steps from the top, in order, up to and including the
  // first error in first_error mode. A give-up sends the same, so it may stop early.
  submittedRatings() {
    let end = 0;
    while (end < this.n && this.ratings[end] !== null) {
      end += 1;
      if (this.firstError && this.ratings[end - 1] === BAD) break;
    }
    const out = [];
    for (let i = 0; i < end; i += 1) out.push({ rating: this.ratings[i], flagged: this.flags[i] });
    return out;
  }

  flaggedCount() {
    if (this.firstError) return this.submittedRatings().filter((r) => r.flagged).length;
    return this.flags.filter((flagged, i) => flagged && this.ratings[i] !== null).length;
  }

  // What a give-up keeps, said where full-mode ratings out of order would be lost: a label holds
  // ratings from step 1 on without a gap. null when everything rated is kept.
  givenUpLoss() {
    const kept = this.submittedRatings().length;
    const lost = this.ratedCount() - kept;
    if (lost <= 0) return null;
    const gap = kept + 1;
    const last = this.ratings.findLastIndex((r) => r !== null) + 1;
    const ratings = `${lost} rating${lost === 1 ? "" : "s"}`;
    const unrated = `step ${gap} is not rated, so your ${ratings} after it would be lost: ` +
      `rate every step up to step ${last} first to keep ${lost === 1 ? "it" : "them"}.`;
    const keptWords = kept === 1 ? "Your rating of step 1 is kept" : `Your ratings of steps 1–${kept} are kept`;
    const said = kept ? `${keptWords}, but ${unrated}` : unrated[0].toUpperCase() + unrated.slice(1);
    return `A label keeps ratings from step 1 on, without gaps. ${said}`;
  }

  // Where a labeler coming back to these ratings (a reload) goes on: the first step left to
  // rate. In full mode reach() stops at the first −1, where a digit would ask to change it.
  resumeAt() {
    if (this.firstError) return Math.min(this.reach(), this.n - 1);
    const unrated = this.ratings.indexOf(null);
    return unrated >= 0 ? unrated : Math.max(this.n - 1, 0);
  }

  // A submitted label's ratings ({rating, flagged} from the top), which a correction starts from.
  prefill(ratings) {
    ratings.slice(0, this.n).forEach((r, i) => {
      this.ratings[i] = r.rating;
      this.flags[i] = Boolean(r.flagged);
    });
    this.cursor = this.firstError ? Math.min(this.reach(), this.n - 1) : 0;
  }

  // A -1 is a finding: a key that would change it is asked to be confirmed, so that a stray
  // press cannot wipe it out (and, in first_error mode, re-open the steps after it).
  needsConfirmation(i, value) {
    return this.ratings[i] === BAD && value !== BAD && this.stepState(i) === "open";
  }

  // first_error: the cursor is on the -1 that ends the solution, and steps follow it unrated.
  atEndingError() {
    const errorAt = this.errorIndex();
    return this.firstError && errorAt >= 0 && this.cursor === errorAt && errorAt < this.n - 1;
  }

  rate(i, value) {
    if (i < 0 || i >= this.n || this.stepState(i) !== "open") return false;
    // The same rating again changes nothing an undo could take back: only the cursor moves on.
    if (this.ratings[i] !== value) {
      this.remember();
      this.ratings[i] = value;
    }
    this.cursor = this.nextCursor(i, value);
    return true;
  }

  toggleFlag(i) {
    if (i < 0 || i >= this.n || this.stepState(i) !== "open") return false;
    this.remember();
    this.flags[i] = !this.flags[i];
    return true;
  }

  moveCursor(delta) {
    const next = Math.max(0, Math.min(this.lastOpen(), this.cursor + delta));
    const moved = next !== this.cursor;
    this.cursor = next;
    return moved;
  }

  setCursor(i) {
    if (i < 0 || i >= this.n || this.stepState(i) !== "open") return false;
    this.cursor = i;
    return true;
  }

  undo() {
    const last = this.history.pop();
    if (!last) return false;
    this.ratings = last.ratings;
    this.flags = last.flags;
    this.cursor = last.cursor;
    return true;
  }

  canUndo() {
    return this.history.length > 0;
  }

  remember() {
    this.history.push({ ratings: [...this.ratings], flags: [...this.flags], cursor: this.cursor });
  }

  // After a rating the cursor goes to the first step still waiting for one, so that going
  // back to fix a step returns you to where you were; it stays put when nothing waits.
  nextCursor(i, value) {
    if (this.firstError) {
      if (value === BAD) return i;
      const reach = this.reach();
      return reach < this.n && this.ratings[reach] === null ? reach : Math.min(reach, this.n - 1);
    }
    for (let k = 1; k <= this.n; k += 1) {
      const j = (i + k) % this.n;
      if (this.ratings[j] === null) return j;
    }
    return i;
  }
}
