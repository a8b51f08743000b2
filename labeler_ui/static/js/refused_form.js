// A form the server refused comes back with its message and fields marked, but the page opened
// at its top: on a long page (a project's members card, the new-user form on a phone) what went
// wrong was below the screen. The first marked field is focused, else the message is shown.

{
  const shown = (element) => element.checkVisibility();
  const field = [...document.querySelectorAll('main [aria-invalid="true"]')].find(shown);
  const message = [...document.querySelectorAll("main .error[role=alert], main .flash.error")].find(shown);
  if (field) {
    field.focus({ preventScroll: true });
    field.scrollIntoView({ block: "center" });
  } else if (message) {
    message.tabIndex = -1;
    message.focus({ preventScroll: true });
    message.scrollIntoView({ block: "center" });
  }
}
