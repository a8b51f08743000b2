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
