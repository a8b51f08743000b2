// The top bar's menu button, shown on narrow screens only (app.css): it folds the main menu
// and the logout form away so that a phone's width goes to the page. Escape folds it again.

const toggle = document.querySelector(".menu-toggle");
const topbar = toggle?.closest(".topbar");

function setOpen(open) {
  toggle.setAttribute("aria-expanded", String(open));
  topbar.classList.toggle("menu-open", open);
}

toggle?.addEventListener("click", () => setOpen(toggle.getAttribute("aria-expanded") !== "true"));

document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || toggle?.getAttribute("aria-expanded") !== "true") return;
  setOpen(false);
  toggle.focus();
});
