// A form the server refused comes back with its message and fields marked, but the page opened
// at its top: on a long page (a project's members card, the new-user form on a phone) what went
// wrong was below the screen. The first marked field is focused, else the message is shown. A
// page that places its own focus (the login form's password field) keeps it.

{
  // checkVisibility is new in Safari (17.4): before it, laid-out boxes mean shown.
  const shown = (element) =>
    element.checkVisibility ? element.checkVisibility() : element.getClientRects().length > 0;
  const target =
    !document.querySelector("main [autofocus]") &&
    ([...document.querySelectorAll('main [aria-invalid="true"]')].find(shown) ??
      [...document.querySelectorAll("main .error[role=alert], main .flash.error")].find(shown));
  if (target) {
    if (!target.matches("input, select, textarea, button")) target.tabIndex = -1;
    target.focus({ preventScroll: true });
    target.scrollIntoView({ block: "center" });
  }
}
