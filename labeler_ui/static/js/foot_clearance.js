// What floats over the foot of the labeling page: the finish bar, stuck to the screen's foot on
// narrow screens, and the notice. Their height is measured into --foot-clearance and
// --notice-clearance, from which labeler.css keeps a focused control, and the side panel's last
// lines, clear of them; a fixed guess would fail as soon as their text wraps.
//
// Returns the measuring itself, for a scroll that must not wait for the observer: it reports a
// bar shown only after the layout that showed it.
export function watchFootClearance(finish, notice) {
  const style = document.documentElement.style;
  const measure = () => {
    const stuck = getComputedStyle(finish).position === "sticky" && !finish.hidden
      ? finish.offsetHeight + (parseFloat(getComputedStyle(finish).bottom) || 0) : 0;
    // Fixed to the screen: what it covers is from its top to the screen's foot.
    const shown = notice.textContent ? Math.max(window.innerHeight - notice.getBoundingClientRect().top, 0) : 0;
    style.setProperty("--notice-clearance", `${Math.ceil(shown)}px`);
    style.setProperty("--foot-clearance", `${Math.ceil(Math.max(stuck, shown))}px`);
  };
  const observer = new ResizeObserver(measure);
  observer.observe(finish);
  observer.observe(notice);
  window.addEventListener("resize", measure);
  measure();
  return measure;
}
