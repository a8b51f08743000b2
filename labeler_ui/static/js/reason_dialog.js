// The small dialog that asks why a labeler gives up or reports a bad problem; a reason is
// required for both (the API refuses an empty one too).

import { showsNothing } from "./blank.js";

const KINDS = {
  give_up: {
    title: "Give up on this solution",
    help: "For a solution you cannot judge, for example one that needs knowledge you lack. A give-up is a label, with the ratings you gave so far; to pass the solution on unlabeled, skip it instead.",
    confirm: "Give up",
    danger: false,
  },
  bad_problem: {
    title: "Report a bad problem",
    help: "The problem is broken, ambiguous or needs a figure that is missing, or the expected answer is wrong.",
    confirm: "Report bad problem",
    danger: true,
  },
};

export class ReasonDialog {
  constructor(onConfirm) {
    this.onConfirm = onConfirm;
    this.dialog = document.getElementById("reason-dialog");
    this.form = document.getElementById("reason-form");
    this.text = document.getElementById("reason-text");
    this.error = document.getElementById("reason-error");
    this.confirm = document.getElementById("reason-confirm");
    this.required = this.error.textContent;
    this.kind = null;
    this.help = null;
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    document.getElementById("reason-cancel").addEventListener("click", () => this.dialog.close());
    this.text.addEventListener("input", () => this.showError(false));
    // Anywhere in the dialog, as the confirm button's hint promises: on a button too, which the
    // key would otherwise click (Cancel, or the confirm button a second time).
    this.dialog.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        this.submit();
      }
    });
  }

  get isOpen() {
    return this.dialog.open;
  }

  // `help` replaces the kind's own sentence where the page knows better what is kept.
  open(kind, help = null) {
    const words = KINDS[kind];
    this.kind = kind;
    this.help = help;
    document.getElementById("reason-title").textContent = words.title;
    document.getElementById("reason-help").textContent = help ?? words.help;
    // Enter writes a new line in the reason: the key that sends it is shown on the button.
    const key = document.createElement("kbd");
    key.textContent = /Mac|iPhone|iPad/.test(navigator.platform) ? "⌘ Enter" : "Ctrl Enter";
    this.confirm.replaceChildren(`${words.confirm} `, key);
    this.confirm.classList.toggle("danger", words.danger);
    this.text.value = "";
    this.showError(false);
    this.dialog.showModal();
    this.text.focus();
  }

  // After the server refused the reason, or could not be reached: the labeler's words are given
  // back with why, to send again or change, rather than typed a second time.
  reopen(kind, note, why) {
    this.open(kind, this.kind === kind ? this.help : null);
    this.text.value = note;
    this.showError(true, why);
  }

  // Tied to the box only while shown: a description is read out even when hidden.
  showError(shown, message = this.required) {
    this.error.textContent = message;
    this.error.hidden = !shown;
    for (const [name, value] of [["aria-invalid", "true"], ["aria-describedby", "reason-error"]]) {
      if (shown) this.text.setAttribute(name, value);
      else this.text.removeAttribute(name);
    }
  }

  submit() {
    const note = this.text.value.trim();
    if (showsNothing(note)) {
      this.showError(true);
      this.text.focus();
      return;
    }
    this.dialog.close();
    this.onConfirm(this.kind, note);
  }
}
