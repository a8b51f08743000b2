// The ratings in progress, kept in localStorage so that a reload or a crashed tab brings the
// labeler back to the same solution (the lease is still theirs) with nothing lost, and with
// the same idempotency key and start time.
//
// One draft per assignment: a labeler with two tabs (two projects, say) rates in both, and a
// submit in one ends only its own draft. A single draft per user lost the other tab's ratings.
// Drafts of leases long gone (a tab closed mid-solution) are dropped after a week.

const KEPT_MS = 7 * 24 * 3600 * 1000;

export class Drafts {
  constructor(username) {
    this.key = `stepwise.drafts.${username}`;
    // Where one draft was kept per user before, by its assignment alone.
    this.single = `stepwise.draft.${username}`;
  }

  read() {
    try {
      const all = JSON.parse(localStorage.getItem(this.key) ?? "{}");
      return all && typeof all === "object" && !Array.isArray(all) ? all : {};
    } catch {
      return {};
    }
  }

  write(all) {
    const now = Date.now();
    const kept = Object.fromEntries(Object.entries(all).filter(([, d]) => now - (Number(d?.savedAt) || 0) < KEPT_MS));
    try {
      if (Object.keys(kept).length) localStorage.setItem(this.key, JSON.stringify(kept));
      else localStorage.removeItem(this.key);
    } catch {
      // Without storage a reload loses the ratings in progress, nothing more.
    }
  }

  // `key` names the lease: its assignment and solution (labeler.js, draftKey).
  load(key) {
    const kept = this.read()[key];
    const draft = kept?.key === key ? kept : this.takeSingle(key);
    if (!draft) return null;
    return {
      idempotencyKey: draft.idempotencyKey,
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
        state.cursor = state.resumeAt();
      },
    };
  }

  // A draft kept the old way, once: its ratings still pass restore()'s checks of their number.
  takeSingle(key) {
    try {
      const old = JSON.parse(localStorage.getItem(this.single) ?? "null");
      localStorage.removeItem(this.single);
      if (!old || `${old.assignmentId}` !== key.split("/")[0]) return null;
      return { ...old, idempotencyKey: old.key };
    } catch {
      return null;
    }
  }

  save(key, state, idempotencyKey, startedAt, activeMs) {
    const progress = state.snapshot ? { phase1: state.snapshot() } : { ratings: state.ratings, flags: state.flags };
    const draft = { key, idempotencyKey, startedAt, activeMs, savedAt: Date.now(), ...progress };
    this.write({ ...this.read(), [key]: draft });
  }

  clear(key) {
    const all = this.read();
    delete all[key];
    this.write(all);
  }
}
