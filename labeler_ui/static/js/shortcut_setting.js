// Whether single-key shortcuts (1 2 3, F, U, G, B, W, J K, ?) are on, kept per labeler in
// localStorage. They can be turned off (WCAG 2.1.4): a speech-input user's dictation, or a key
// meant for a screen reader, would otherwise rate, flag or give up. Off, each step's buttons join
// the Tab order and lose their "(key 1)" hint; the arrows, Enter, Esc and Ctrl Z are no character
// keys and stay.

const STEP_BUTTONS = ".step-controls button, .own-open, button.step-num";

export class ShortcutSetting {
  constructor(username, root, checkbox, onChange) {
    this.key = `stepwise:single-key-shortcuts:${username}`;
    this.root = root;
    this.on = readStored(this.key) !== "off";
    checkbox.checked = this.on;
    checkbox.addEventListener("change", () => {
      this.on = checkbox.checked;
      store(this.key, this.on ? null : "off");
      this.apply();
      onChange();
    });
  }

  // Applied to the page as it is, and again to each solution's new step nodes.
  apply() {
    this.root.dataset.singleKeys = this.on ? "on" : "off";
    for (const button of this.root.querySelectorAll(STEP_BUTTONS)) {
      button.tabIndex = this.on ? -1 : 0;
      const label = button.getAttribute("aria-label");
      if (label === null) continue;
      button.dataset.keyedLabel ??= label;
      button.setAttribute("aria-label", this.on ? button.dataset.keyedLabel : label.replace(/ \(key .\)$/, ""));
    }
  }
}

// Storage can be refused (a private window's quota, a policy): the setting then lasts the page.
function readStored(key) {
  try {
    return localStorage.getItem(key);
  } catch {
    return null;
  }
}

function store(key, value) {
  try {
    if (value === null) localStorage.removeItem(key);
    else localStorage.setItem(key, value);
  } catch {
    // Kept for this page only; see readStored.
  }
}
