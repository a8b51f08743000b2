// A table wider than the screen scrolls in its .table-scroll box (app.css), and on a phone it
// looked cut at the edge, with nothing to say that more lay beyond. As math.js does for a wide
// display, the box is marked while it scrolls, and the side out of sight fades (app.css).

function mark(box) {
  const hidden = box.scrollWidth - box.clientWidth;
  box.classList.toggle("scrolls", hidden > 1);
  box.classList.toggle("scrolled", box.scrollLeft > 1);
  box.classList.toggle("at-end", box.scrollLeft >= hidden - 1);
}

// The box's size and its table's: a table in a closed <details> has no width until it opens,
// and one grows as rows come.
const sizes = new ResizeObserver((entries) => {
  for (const { target } of entries) mark(target.closest(".table-scroll"));
});

for (const box of document.querySelectorAll(".table-scroll")) {
  sizes.observe(box);
  if (box.firstElementChild) sizes.observe(box.firstElementChild);
  box.addEventListener("scroll", () => mark(box), { passive: true });
}
