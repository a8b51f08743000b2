// A form marked `data-confirm` asks before it posts: removing a member ends their tasks in
// progress, deactivating a user revokes their API tokens for good, cancelling a round throws
// its training away. One click on a small button in a long table was all these took. The
// question, an optional detail and both buttons' words come from the form's data attributes
// and are set as text. With `data-confirm-when="field=value"` it asks only when that field holds
// that value (making someone an admin, not every role change). With `data-confirm-password` the
// dialog also asks for the admin's own password and posts it as `your_password` (making an admin,
// changing another admin: the server refuses these without it). Without JavaScript the form posts
// as it always did, and the server's page asks for the password itself.

{
  let dialog = null;

  const build = () => {
    dialog = document.createElement("dialog");
    dialog.className = "confirm-dialog";
    dialog.setAttribute("aria-labelledby", "confirm-title");
    dialog.setAttribute("aria-describedby", "confirm-detail");
    const form = document.createElement("form");
    form.method = "dialog";
    const title = document.createElement("h2");
    title.id = "confirm-title";
    const detail = document.createElement("p");
    detail.id = "confirm-detail";
    detail.className = "muted";
    const password = document.createElement("label");
    password.id = "confirm-password";
    password.append("Your password");
    const input = document.createElement("input");
    input.type = "password";
    input.autocomplete = "current-password";
    input.maxLength = 1024;
    // Enter in the field confirms; the form's own default button is Cancel.
    input.addEventListener("keydown", (event) => {
      if (event.key !== "Enter") return;
      event.preventDefault();
      if (input.reportValidity()) dialog.close("act");
    });
    password.append(input);
    const actions = document.createElement("div");
    actions.className = "actions";
    const keep = document.createElement("button");
    keep.value = "keep";
    keep.className = "ghost";
    keep.id = "confirm-keep";
    keep.formNoValidate = true;
    const act = document.createElement("button");
    act.value = "act";
    act.className = "danger";
    act.id = "confirm-act";
    actions.append(keep, act);
    form.append(title, detail, password, actions);
    dialog.append(form);
    document.body.append(dialog);
  };

  const ask = (form, submitter) => {
    if (!dialog) build();
    dialog.querySelector("#confirm-title").textContent = form.dataset.confirm;
    const detail = dialog.querySelector("#confirm-detail");
    detail.textContent = form.dataset.confirmDetail ?? "";
    detail.hidden = !form.dataset.confirmDetail;
    dialog.querySelector("#confirm-act").textContent = form.dataset.confirmButton ?? "Confirm";
    dialog.querySelector("#confirm-keep").textContent = form.dataset.confirmKeep ?? "Cancel";
    const asksPassword = "confirmPassword" in form.dataset;
    const password = dialog.querySelector("#confirm-password");
    const input = password.querySelector("input");
    password.hidden = !asksPassword;
    input.required = asksPassword;
    input.value = "";
    dialog.returnValue = "";
    dialog.addEventListener(
      "close",
      () => {
        const given = input.value;
        input.value = "";
        if (dialog.returnValue !== "act") return;
        // Sent with the form, then taken out of the page again.
        const carried = asksPassword ? carry(form, given) : null;
        // The submit event is dispatched within requestSubmit, so the mark is needed only
        // for it: a page come back from the history asks again.
        form.dataset.confirmed = "yes";
        if (form.requestSubmit) form.requestSubmit(submitter ?? undefined);
        else form.submit();
        delete form.dataset.confirmed;
        carried?.remove();
      },
      { once: true },
    );
    dialog.showModal();
    // The safe answer has the focus: Enter on a mistaken click keeps things as they are. Where
    // a password is asked, typing it and Enter is no mistaken click.
    (asksPassword ? input : dialog.querySelector("#confirm-keep")).focus();
  };

  const carry = (form, password) => {
    const field = document.createElement("input");
    field.type = "hidden";
    field.name = "your_password";
    field.value = password;
    form.append(field);
    return field;
  };

  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (!form.matches("form[data-confirm]") || form.dataset.confirmed === "yes") return;
    if (form.dataset.confirmWhen) {
      const [field, value] = form.dataset.confirmWhen.split("=");
      if (form.elements.namedItem(field)?.value !== value) return;
    }
    // Without <dialog> (Safari before 15.4) the browser's own question asks the same, and the
    // server's page asks for a password the dialog would have.
    if (typeof HTMLDialogElement === "undefined") {
      const detail = form.dataset.confirmDetail ? `\n\n${form.dataset.confirmDetail}` : "";
      if (!window.confirm(`${form.dataset.confirm}${detail}`)) event.preventDefault();
      return;
    }
    event.preventDefault();
    ask(form, event.submitter);
  });
}
