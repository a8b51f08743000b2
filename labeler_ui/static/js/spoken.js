// What a screen reader is told of a problem or a step drawn on the page (math.js): its words,
// with each formula in words where it is short and plain ("x + 2 = 5", "15 over 3"), else the
// word "formula". Read as LaTeX source, a problem began "Define backslash bracket p equals backslash
// sum underscore".

// Read from the MathML that KaTeX writes beside its drawing: its leaves are the formula's
// symbols in reading order. Sums, matrices and the like are not read: their words would be long.
const SAID = {
  mfrac: (a, b) => `${a} over ${b}`,
  msup: (a, b) => `${a} to the power ${b}`,
  msub: (a, b) => `${a} sub ${b}`,
  msqrt: (...a) => `square root of ${a.join(" ")}`,
};
const GROUPS = new Set(["math", "semantics", "mrow", "mstyle", "mpadded", "menclose"]);
const LEAVES = new Set(["mi", "mn", "mo", "mtext", "ms"]);
const SILENT = new Set(["annotation", "mspace", "mphantom"]);
// Longer than this, the words of a formula are no quicker to hear than the page is to read.
const MAX_FORMULA_CHARS = 40;
const FORMULA = "formula";
const RAW_MATH = /\$\$[\s\S]*?\$\$|\\\[[\s\S]*?\\\]|\\\([\s\S]*?\\\)|(?<!\\)\$[^$]+\$/g;

function words(node) {
  const name = node.localName;
  if (SILENT.has(name)) return "";
  if (LEAVES.has(name)) return node.textContent.trim();
  const parts = [...node.children].map(words);
  if (parts.includes(null)) return null;
  if (GROUPS.has(name)) return parts.filter(Boolean).join(" ");
  return SAID[name] ? SAID[name](...parts) : null;
}

function formulaWords(katex) {
  const math = katex.querySelector("math");
  const said = math ? words(math) : null;
  return said && said.length <= MAX_FORMULA_CHARS ? said : FORMULA;
}

function collect(node, out) {
  if (node.nodeType === Node.TEXT_NODE) {
    // Shown as source where KaTeX is not installed: the source is not read out either.
    out.push(node.textContent.replace(RAW_MATH, ` ${FORMULA} `));
    return;
  }
  if (node.nodeType !== Node.ELEMENT_NODE) return;
  const element = node;
  if (element.classList.contains("katex")) out.push(` ${formulaWords(element)} `);
  else if (element.classList.contains("math-source")) out.push(` ${FORMULA} `);
  else if (element.matches(".asy-figure, .asy-source")) out.push(" figure ");
  else if (element.matches("pre")) out.push(" code ");
  // PRM800K's "# Answer" heading (math.js): its "#" is no word.
  else if (element.classList.contains("answer-heading")) out.push(" Answer: ");
  else for (const child of element.childNodes) collect(child, out);
}

// The text of `element` as words, cut at a word's end after `limit` characters.
export function spokenText(element, limit) {
  const out = [];
  collect(element, out);
  const text = out.join("").replace(/\s+/g, " ").replace(/ ([.,;:!?])/g, "$1").trim();
  if (text.length <= limit) return text;
  const cut = text.slice(0, limit + 1);
  const end = cut.lastIndexOf(" ");
  return `${(end > 0 ? cut.slice(0, end) : cut.slice(0, limit)).replace(/[,;:]$/, "")}…`;
}
