// A form marked `data-confirm` asks before it posts: removing a member ends their tasks in
// progress, deactivating a user revokes their API tokens for good, cancelling a round throws
// its training away. One click on a small button in a long table was all these took. The
// question, an optional detail and both buttons' words come from the form's data attributes
// and are set as text. With `data-confirm-when="field=value"` it asks only when that field holds
// that value (making someone an admin, not every role change). Without JavaScript the form posts
// as it always did.

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
    const actions = document.createElement("div");
    actions.className = "actions";
    const keep = document.createElement("button");
    keep.value = "keep";
    keep.className = "ghost";
    keep.id = "confirm-keep";
    const act = document.createElement("button");
    act.value = "act";
    act.className = "danger";
    act.id = "confirm-act";
    actions.append(keep, act);
    form.append(title, detail, actions);
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
    dialog.returnValue = "";
    dialog.addEventListener(
      "close",
      () => {
        if (dialog.returnValue !== "act") return;
        // The submit event is dispatched within requestSubmit, so the mark is needed only
        // for it: a page come back from the history asks again.
        form.dataset.confirmed = "yes";
        if (form.requestSubmit) form.requestSubmit(submitter ?? undefined);
        else form.submit();
        delete form.dataset.confirmed;
      },
      { once: true },
    );
    dialog.showModal();
    // The safe answer has the focus: Enter on a mistaken click keeps things as they are.
    dialog.querySelector("#confirm-keep").focus();
  };

  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (!form.matches("form[data-confirm]") || form.dataset.confirmed === "yes") return;
    if (form.dataset.confirmWhen) {
      const [field, value] = form.dataset.confirmWhen.split("=");
      if (form.elements.namedItem(field)?.value !== value) return;
    }
    // Without <dialog> (Safari before 15.4) the browser's own question asks the same.
    if (typeof HTMLDialogElement === "undefined") {
      const detail = form.dataset.confirmDetail ? `\n\n${form.dataset.confirmDetail}` : "";
      if (!window.confirm(`${form.dataset.confirm}${detail}`)) event.preventDefault();
      return;
    }
    event.preventDefault();
    ask(form, event.submitter);
  });
}
