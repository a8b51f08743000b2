// Whether a text shows nothing, as the server judges a reason or a written step
// (active_learning.data.is_blank): white space, control and format characters (a zero-width
// space, which String.prototype.trim keeps) and the blank fillers.
const NOTHING = /^[\p{White_Space}\p{Cc}\p{Cf}\u115f\u1160\u3164\uffa0\u2800]*$/u;

export function showsNothing(text) {
  return NOTHING.test(text);
}
