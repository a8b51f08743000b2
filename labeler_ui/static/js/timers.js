// Time on task and the lease clock.

// Time counts while the tab is visible and the labeler has done something in the last two
// minutes: reading a long step counts, a lunch break with the tab open does not.
const IDLE_MS = 120000;
const TICK_MS = 1000;
const ACTIVITY_EVENTS = ["keydown", "pointerdown", "pointermove", "wheel", "scroll", "focus"];

export class ActiveTimer {
  constructor(onTick) {
    this.onTick = onTick;
    this.activeMs = 0;
    this.last = performance.now();
    this.lastActivity = this.last;
    const touch = () => {
      this.lastActivity = performance.now();
    };
    for (const name of ACTIVITY_EVENTS) window.addEventListener(name, touch, { passive: true, capture: true });
    document.addEventListener("visibilitychange", () => {
      this.tick();
      touch();
    });
    setInterval(() => this.tick(), TICK_MS);
  }

  reset() {
    this.activeMs = 0;
    this.last = performance.now();
    this.lastActivity = this.last;
    this.onTick(0);
  }

  tick() {
    const now = performance.now();
    const counted = Math.max(0, Math.min(now, this.lastActivity + IDLE_MS) - this.last);
    if (document.visibilityState === "visible") this.activeMs += counted;
    this.last = now;
    this.onTick(this.activeMs);
  }

  // Whether time counts now: the tab is visible and the labeler did something lately.
  isActive() {
    return document.visibilityState === "visible" && performance.now() - this.lastActivity < IDLE_MS;
  }

  elapsedMs() {
    this.tick();
    return Math.round(this.activeMs);
  }
}

export function formatDuration(ms) {
  const total = Math.max(0, Math.floor(ms / 1000));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = String(total % 60).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${s}` : `${m}:${s}`;
}

// Converts between this computer's clock and the server's, from the Date header of the
// server's answers (whole seconds, which is plenty for a lease of minutes).
export class ServerClock {
  constructor() {
    this.offsetMs = 0;
  }

  sync(serverDate) {
    if (serverDate !== null) this.offsetMs = serverDate - Date.now();
  }

  now() {
    return Date.now() + this.offsetMs;
  }
}
