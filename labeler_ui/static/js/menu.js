// The top bar's menu button, shown on narrow screens only (app.css): it folds the main menu
// and the logout form away so that a phone's width goes to the page.

const toggle = document.querySelector(".menu-toggle");
const topbar = toggle?.closest(".topbar");

toggle?.addEventListener("click", () => {
  const open = toggle.getAttribute("aria-expanded") !== "true";
  toggle.setAttribute("aria-expanded", String(open));
  topbar.classList.toggle("menu-open", open);
});
