// The project's guidelines in a dialog on the labeling page: opened with ? or its button, and by
// itself, before the first task, when this labeler has not read this version of them (a
// manager's edit makes a new version). Closing the dialog tells the server, so that the manager
// sees who has read what, and the guidelines do not open again on the labeler's other devices.

import { postJson } from "./api.js";
import { renderFormulas } from "./math.js";

export class GuidelinesDialog {
  // `state` is {version, read} from the page, or null when the project has no guidelines.
  constructor(projectId, state) {
    this.dialog = document.getElementById("guidelines-dialog");
    this.url = `/api/v1/projects/${projectId}/guidelines/read`;
    this.state = state;
    this.closed = null;
    if (!this.dialog) return;
    renderFormulas(this.dialog);
    document.getElementById("guidelines-open").addEventListener("click", (event) => {
      // A pointer's click leaves focus on the page (Enter submits); the keyboard's stays, and
      // the dialog gives it back to the button on close.
      if (event.detail > 0) event.currentTarget.blur();
      this.open();
    });
    this.text = document.getElementById("guidelines");
    this.dialog.addEventListener("keydown", (event) => this.scrollText(event));
    this.dialog.addEventListener("close", () => {
      this.acknowledge();
      this.closed?.();
      this.closed = null;
    });
  }

  get available() {
    return this.dialog !== null;
  }

  get isOpen() {
    return this.available && this.dialog.open;
  }

  open() {
    if (this.available && !this.dialog.open) this.dialog.showModal();
  }

  // The focus starts on "Got it", outside the text that scrolls, where the keys that scroll a page
  // scrolled nothing: from anywhere in the dialog they scroll the text. In the text (the region
  // itself, a link in it) they are the browser's, which scrolls it.
  scrollText(event) {
    const text = this.text;
    if (event.ctrlKey || event.metaKey || event.altKey || text.contains(event.target)) return;
    // The steps Chromium itself takes: 40px a line, seven eighths of the box a page.
    const page = text.clientHeight * 0.875;
    const by = { ArrowDown: 40, ArrowUp: -40, PageDown: page, PageUp: -page }[event.key];
    if (by !== undefined) text.scrollBy({ top: by });
    else if (event.key === "Home") text.scrollTo({ top: 0 });
    else if (event.key === "End") text.scrollTo({ top: text.scrollHeight });
    else return;
    event.preventDefault();
  }

  // Resolves once the labeler has closed guidelines new to them, at once when there are none.
  showUnread() {
    if (!this.available || !this.state || this.state.read) return Promise.resolve();
    return new Promise((resolve) => {
      this.closed = resolve;
      this.open();
    });
  }

  async acknowledge() {
    if (!this.state || this.state.read) return;
    try {
      await postJson(this.url, { version: this.state.version });
      this.state.read = true;
    } catch {
      // Not recorded (offline, or edited meanwhile): the guidelines open by themselves next time.
    }
  }
}
