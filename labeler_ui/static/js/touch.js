// A touch screen with no mouse (a phone, a tablet): there are no keys to name and nothing to
// hover, so the page names what to tap. The stylesheets hide key badges by the same query.
export const TOUCH_ONLY = matchMedia("(hover: none) and (pointer: coarse)").matches;
