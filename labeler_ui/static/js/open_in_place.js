// A form that opens in place (an admin's Set password, in a <details>) takes the focus when it
// opens, so that the password can be typed at once: the focus stayed on the summary, which
// opening hides.
for (const details of document.querySelectorAll("details[data-focus-on-open]")) {
  details.addEventListener("toggle", () => {
    if (details.open) details.querySelector("input:not([type=hidden]), textarea, select")?.focus();
  });
}
