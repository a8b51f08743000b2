// Whether a text shows nothing, as the server judges a reason or a written step
// (active_learning.data.is_blank): white space, control and format characters (a zero-width
// space, which String.prototype.trim keeps), the blank fillers, and the model's step marker,
// which the server takes out until none is left.
const NOTHING = /^[\p{White_Space}\p{Cc}\p{Cf}\u115f\u1160\u3164\uffa0\u2800]*$/u;
const STEP_MARKER = "<|step|>";

export function showsNothing(text) {
  let left = text;
  while (left.includes(STEP_MARKER)) left = left.replaceAll(STEP_MARKER, "");
  return NOTHING.test(left);
}
