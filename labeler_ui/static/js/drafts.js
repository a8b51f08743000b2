// The ratings in progress, kept in localStorage so that a reload or a crashed tab brings the
// labeler back to the same solution (the lease is still theirs) with nothing lost, and with
// the same idempotency key and start time.

export class Drafts {
  constructor(username) {
    this.key = `stepwise.draft.${username}`;
  }

  load(assignmentId) {
    let draft;
    try {
      draft = JSON.parse(localStorage.getItem(this.key) ?? "null");
    } catch {
      return null;
    }
    if (!draft || draft.assignmentId !== assignmentId) return null;
    return {
      key: draft.key,
      startedAt: draft.startedAt,
      activeMs: Number(draft.activeMs) || 0,
      restore(state) {
        // Phase-1 mode's state checks and takes its own snapshot.
        if (state.snapshot) {
          state.restore(draft.phase1);
          return;
        }
        const valid = (r) => r === null || r === -1 || r === 0 || r === 1;
        if (draft.ratings?.length !== state.n || draft.flags?.length !== state.n) return;
        if (!draft.ratings.every(valid)) return;
        state.ratings = [...draft.ratings];
        state.flags = draft.flags.map(Boolean);
        state.cursor = Math.min(state.reach(), state.n - 1);
      },
    };
  }

  save(assignmentId, state, key, startedAt, activeMs) {
    const progress = state.snapshot ? { phase1: state.snapshot() } : { ratings: state.ratings, flags: state.flags };
    const draft = { assignmentId, key, startedAt, activeMs, ...progress };
    try {
      localStorage.setItem(this.key, JSON.stringify(draft));
    } catch {
      // Without storage a reload loses the ratings in progress, nothing more.
    }
  }

  clear() {
    localStorage.removeItem(this.key);
  }
}
