// The project's guidelines in a dialog on the labeling page: opened with ? or its button, and by
// itself, before the first task, when this labeler has not yet seen this version of them in this
// browser (a manager's edit makes a new version).

import { renderFormulas } from "./math.js";

export class GuidelinesDialog {
  constructor(username, projectId, version) {
    this.dialog = document.getElementById("guidelines-dialog");
    this.key = `stepwise.guidelines.${username}.${projectId}`;
    this.version = version;
    this.closed = null;
    if (!this.dialog) return;
    renderFormulas(this.dialog);
    document.getElementById("guidelines-open").addEventListener("click", (event) => {
      event.currentTarget.blur();
      this.open();
    });
    this.dialog.addEventListener("close", () => {
      this.remember();
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
  showUnseen() {
    if (!this.available || !this.version || this.seen() === this.version) return Promise.resolve();
    return new Promise((resolve) => {
      this.closed = resolve;
      this.open();
    });
  }

  seen() {
    try {
      return localStorage.getItem(this.key);
    } catch {
      return null;
    }
  }

  remember() {
    if (!this.version) return;
    try {
      localStorage.setItem(this.key, this.version);
    } catch {
      // Storage refused (private mode, full): the guidelines open by themselves again next time.
    }
  }
}
