// Text with LaTeX in it, shown as text: it goes in through textContent, and KaTeX then
// replaces the math it finds in the resulting text nodes. Nothing from the data is ever parsed
// as HTML, and KaTeX runs with `trust` off, so \href, \url and friends render as plain text.

const ENVIRONMENTS = ["equation", "align", "alignat", "gather", "CD"];

const DELIMITERS = [
  // $$ before $, so that display math is not read as two empty inline formulas.
  { left: "$$", right: "$$", display: true },
  { left: "\\[", right: "\\]", display: true },
  { left: "\\(", right: "\\)", display: false },
  ...ENVIRONMENTS.flatMap((env) => [
    { left: `\\begin{${env}}`, right: `\\end{${env}}`, display: true },
    { left: `\\begin{${env}*}`, right: `\\end{${env}*}`, display: true },
  ]),
  { left: "$", right: "$", display: false },
];

const KATEX_OPTIONS = {
  throwOnError: false,
  strict: "ignore",
  trust: false,
  // Hostile input must not be able to draw a 10,000em rule over the page or expand forever.
  maxSize: 20,
  maxExpand: 1000,
};

export function mathAvailable() {
  return typeof window.katex !== "undefined" && typeof window.renderMathInElement === "function";
}

export function renderMathText(element, text) {
  element.textContent = text;
  if (!mathAvailable()) return;
  window.renderMathInElement(element, {
    ...KATEX_OPTIONS,
    delimiters: DELIMITERS,
    errorCallback: () => {},
  });
  renderBareBoxes(element);
}

// PRM800K's last step: "# Answer", a blank line, then the answer as bare LaTeX ("106^\circ"),
// which has no delimiters for renderMathText to find.
const ANSWER_SECTION = /^# Answer[ \t]*\n\s*/;
// Words or lines in the answer ("5 apples each", a second paragraph) are shown as text: math mode
// would run the words together in italics. Words inside commands (\text{apples}) do not count.
function isProse(answer) {
  if (answer.includes("\n")) return true;
  const bare = answer.replace(/\\[a-zA-Z]+(\{[^{}]*\})?/g, " ");
  return /[a-zA-Z]{3,}|[a-zA-Z]{2,}\s+[a-zA-Z]{2,}/.test(bare);
}

// One step of a solution: text with math, or an answer section with its answer as math.
export function renderStepText(element, text) {
  const heading = ANSWER_SECTION.exec(text);
  const answer = heading ? text.slice(heading[0].length).trim() : "";
  if (!heading || !answer || answer.includes("$") || isProse(answer) || !mathAvailable()) {
    renderMathText(element, text);
    return;
  }
  const title = document.createElement("span");
  title.className = "answer-heading";
  title.textContent = "# Answer";
  const value = document.createElement("span");
  value.className = "answer-value";
  try {
    window.katex.render(answer, value, { ...KATEX_OPTIONS, throwOnError: true });
  } catch {
    value.textContent = answer;
  }
  element.replaceChildren(title, value);
}

// The expected answer, boxed as PRM800K shows it. Answers are LaTeX without delimiters
// ("\frac{14}{3}"); one KaTeX cannot parse is shown as text in the same box.
export function renderAnswer(element, answer) {
  element.replaceChildren();
  element.classList.toggle("answer-none", answer === null || answer === "");
  if (answer === null || answer === "") {
    element.textContent = "not given";
    return;
  }
  if (mathAvailable() && !answer.includes("$")) {
    try {
      window.katex.render(`\\boxed{${answer}}`, element, { ...KATEX_OPTIONS, throwOnError: true });
      element.classList.remove("answer-plain");
      return;
    } catch {
      element.replaceChildren();
    }
  }
  element.classList.add("answer-plain");
  renderMathText(element, answer);
}

// A final answer inline, as in the picks inspector: the same LaTeX without a box, and as text
// where KaTeX cannot parse it.
export function renderInlineAnswer(element, answer) {
  if (!mathAvailable() || answer.includes("$")) return;
  try {
    window.katex.render(answer, element, { ...KATEX_OPTIONS, throwOnError: true });
  } catch {
    element.textContent = answer;
  }
}

// "\boxed{…}" written outside any math delimiters (common in model-written final steps).
function renderBareBoxes(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
    acceptNode: (node) =>
      node.parentElement.closest(".katex") || !node.data.includes("\\boxed{")
        ? NodeFilter.FILTER_REJECT
        : NodeFilter.FILTER_ACCEPT,
  });
  const nodes = [];
  while (walker.nextNode()) nodes.push(walker.currentNode);
  for (const node of nodes) replaceBoxes(node);
}

function replaceBoxes(node) {
  const text = node.data;
  const parts = [];
  let at = 0;
  let start = text.indexOf("\\boxed{");
  while (start >= 0) {
    const end = closingBrace(text, start + "\\boxed{".length);
    if (end < 0) break;
    parts.push(document.createTextNode(text.slice(at, start)));
    const span = document.createElement("span");
    window.katex.render(text.slice(start, end + 1), span, KATEX_OPTIONS);
    parts.push(span);
    at = end + 1;
    start = text.indexOf("\\boxed{", at);
  }
  if (!parts.length) return;
  parts.push(document.createTextNode(text.slice(at)));
  node.replaceWith(...parts);
}

function closingBrace(text, from) {
  let depth = 1;
  for (let i = from; i < text.length; i += 1) {
    const c = text[i];
    if (c === "\\") i += 1;
    else if (c === "{") depth += 1;
    else if (c === "}" && (depth -= 1) === 0) return i;
  }
  return -1;
}
