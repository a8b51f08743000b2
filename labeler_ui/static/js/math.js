// Text with LaTeX in it, shown as text: it goes in through textContent, and KaTeX then
// replaces the math it finds in the resulting text nodes. Nothing from the data is ever parsed
// as HTML, and KaTeX runs with `trust` off, so \href, \url and friends render as plain text.

import { getJson } from "./api.js";

// Written bare in text, outside $…$: MATH puts tables and sign charts in `array` (and `tabular`,
// turned into `array` below).
const ENVIRONMENTS = ["equation", "align", "alignat", "gather", "CD", "array"];

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

// KaTeX draws an undefined command inside an otherwise rendered formula in errorColor. This colour
// is ours alone, so that finding it finds those commands and never a formula's own \color.
const ERROR_COLOR = "#cc0001";
const ERROR_RGB = "rgb(204, 0, 1)";

// An escaped dollar is a dollar sign, in text as in math, but KaTeX's auto-render takes the one in
// text for a delimiter ("it costs \$5 and \$6" became math from 5 to 6). Every escaped dollar goes
// through as a backslash and a character of Unicode's private use area, which KaTeX reads as a
// control symbol: inside math a macro makes it \$ again, and in the text left over it becomes "$"
// (restoreDollars).
const DOLLAR = "\\\uE000";
const ESCAPED_DOLLAR = /(?<!\\)\\\$/g;

// LaTeX that MATH's solutions use and KaTeX lacks, drawn as near as KaTeX can: \mbox is \text,
// and \cancelto's value sits above the struck-out term instead of at an arrow's end.
const MACROS = {
  "\\mbox": "\\text{#1}",
  "\\cancelto": "\\overset{#1}{\\cancel{#2}}",
  [DOLLAR]: "\\$",
};

const KATEX_OPTIONS = {
  throwOnError: false,
  errorColor: ERROR_COLOR,
  strict: "ignore",
  trust: false,
  // Hostile input must not be able to draw a 10,000em rule over the page or expand forever.
  maxSize: 20,
  maxExpand: 1000,
  // A copy for each render: KaTeX writes a formula's \gdef into the object it is given, and a
  // shared one would carry one step's definitions into every later formula on the page.
  get macros() {
    return { ...MACROS };
  },
};

export function mathAvailable() {
  return typeof window.katex !== "undefined" && typeof window.renderMathInElement === "function";
}

// For one-line previews of a problem: $$…$$ and \[…\] set in the line. The environments stay
// displays, as KaTeX draws align and its kin in display mode only; the previews' CSS keeps
// those in the line.
const INLINE_DELIMITERS = DELIMITERS.map((d) => (d.left.startsWith("\\begin") ? d : { ...d, display: false }));

// A display set in the line loses the line break around it, and MATH writes "$$1 + 2$$is
// equivalent to 13": a space keeps it from running into the words on either side, but not
// into an opening bracket before it or punctuation after it.
const DISPLAY_MATH = /(?<!\\)\$\$[\s\S]+?\$\$|\\\[[\s\S]+?\\\]/g;

function displaysApart(text) {
  return text.replace(DISPLAY_MATH, (display, at) => {
    const before = text[at - 1] ?? " ";
    const after = text[at + display.length] ?? " ";
    return `${/[\s([{]/.test(before) ? "" : " "}${display}${/[\s.,;:!?)\]}…]/.test(after) ? "" : " "}`;
  });
}

// A fenced code block in a step (models write Python to check their arithmetic): shown as code,
// its indentation kept and nothing in it read as math.
const CODE_FENCE = /```[^\n`]*\n([\s\S]*?)```/g;

export function renderMathText(element, text, { inline = false } = {}) {
  if (inline) text = displaysApart(text);
  if (!inline && text.includes("```")) {
    const parts = text.split(CODE_FENCE);
    if (parts.length > 1) {
      element.replaceChildren(...parts.map((part, i) => {
        if (i % 2) {
          const block = document.createElement("pre");
          block.className = "step-code";
          block.dir = "ltr";  // in a right-to-left step too
          const code = document.createElement("code");
          code.textContent = part.replace(/\n$/, "");
          block.append(code);
          return block;
        }
        const span = document.createElement("span");
        renderMathText(span, part.replace(/^[ \t]*\n/, "").replace(/\n[ \t]*$/, ""));
        return span;
      }));
      return;
    }
  }
  element.textContent = mathAvailable() ? pairDollars(tabularsToArrays(forKatex(text)).replace(ESCAPED_DOLLAR, DOLLAR)) : text;
  if (!mathAvailable()) return;
  window.renderMathInElement(element, {
    ...KATEX_OPTIONS,
    delimiters: inline ? INLINE_DELIMITERS : DELIMITERS,
    errorCallback: () => {},
  });
  showUnbalanced(element);
  // A bare \boxed{…} is drawn with its escaped dollars still in the placeholder, which KaTeX reads.
  renderBareBoxes(element);
  restoreDollars(element);
  quietErrors(element);
  for (const display of element.querySelectorAll(".katex-display")) hintScrolling(display);
  // Left to right in any text (app.css), and passed over where the browser reads a text's
  // direction from its first letters (dir="auto"): a Hebrew sentence that opens with $x$ is
  // right to left.
  for (const formula of element.querySelectorAll(".katex, .math-source")) formula.dir = "ltr";
}

// Which single dollars open and close a formula is decided here, not by KaTeX's auto-render,
// which pairs the first two it meets: "I paid $5 and then $7" became math from 5 to 7, and one
// unclosed brace ($\frac{1}{$), over which KaTeX looks for the closing dollar, left every later
// formula of the step as text. Read left to right as KaTeX reads ("$x,$$y,$" is two formulas, a
// dollar inside braces closes nothing, $$…$$ is left to it), with two changes: a dollar before a
// digit may be a price, and opens a formula only if the dollar that would close it is neither
// before a digit nor after a space (pandoc's rule); a formula that closes only past its braces
// closes at the next dollar and is marked, to be shown as source (showUnbalanced). A dollar that
// opens nothing is a dollar sign. MATH-500's 1,000 texts pair exactly as KaTeX pairs them.
const UNBALANCED_START = "\uE001";
const UNBALANCED_END = "\uE002";

function pairDollars(text) {
  if (!text.includes("$")) return text;
  const digit = (c) => /\d/.test(c ?? "");
  // The next dollar from `from` that would close a formula: outside braces, or any.
  const closing = (from, braces) => {
    let depth = 0;
    for (let i = from; i < text.length; i += 1) {
      const c = text[i];
      if (c === "\\") i += 1;
      else if (braces && c === "{") depth += 1;
      else if (braces && c === "}") depth = Math.max(0, depth - 1);
      else if (c === "$" && depth === 0) return i;
    }
    return -1;
  };
  let out = "";
  let at = 0;
  for (let i = 0; i < text.length; i += 1) {
    if (text[i] === "\\") {
      i += 1;
      continue;
    }
    if (text[i] !== "$") continue;
    if (text[i + 1] === "$") {
      const end = text.indexOf("$$", i + 2);
      if (end < 0) break;
      i = end + 1;
      continue;
    }
    let close = closing(i + 1, true);
    if (close < 0) close = closing(i + 1, false);
    const price = digit(text[i + 1]) && (digit(text[close + 1]) || /\s/.test(text[close - 1]));
    if (close < 0 || price) {
      out += `${text.slice(at, i)}${DOLLAR}`;
      at = i + 1;
      continue;
    }
    const body = text.slice(i + 1, close);
    out += text.slice(at, i) + (balanced(body) ? `$${body}$` : `${UNBALANCED_START}${body}${UNBALANCED_END}`);
    at = close + 1;
    i = close;
  }
  return out + text.slice(at);
}

function balanced(latex) {
  let depth = 0;
  for (let i = 0; i < latex.length; i += 1) {
    if (latex[i] === "\\") i += 1;
    else if (latex[i] === "{") depth += 1;
    else if (latex[i] === "}" && (depth -= 1) < 0) return false;
  }
  return depth === 0;
}

function showUnbalanced(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const marked = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.data.includes(UNBALANCED_START)) marked.push(node);
  }
  for (const node of marked) {
    const parts = node.data.split(new RegExp(`${UNBALANCED_START}([^${UNBALANCED_END}]*)${UNBALANCED_END}`));
    node.replaceWith(...parts.map((part, i) => {
      if (i % 2 === 0) return document.createTextNode(part);
      const holder = document.createElement("span");
      showSource(holder, part, "a brace is opened and not closed (or closed and not opened)");
      return holder.firstChild;
    }));
  }
}

// Text the auto-render left alone reads "$"; LaTeX source kept beside a formula (its annotation, or
// a formula KaTeX could not parse) reads "\$" as written.
function restoreDollars(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.data.includes(DOLLAR)) continue;
    const source = node.parentElement?.closest("annotation, .katex-error, .math-source");
    node.data = node.data.replaceAll(DOLLAR, source ? "\\$" : "$");
  }
}

// A display wider than its box scrolls sideways, and on a phone nothing showed that it went
// on: a labeler could rate a step without seeing its end. Its hidden side fades out
// (app.css, .katex-display.scrolls) until it is scrolled into view.
const displays = new ResizeObserver((entries) => {
  for (const { target } of entries) {
    if (target.isConnected) markScrolling(target);
    else displays.unobserve(target);
  }
});

function hintScrolling(display) {
  displays.observe(display);
  display.addEventListener("scroll", () => markScrolling(display), { passive: true });
}

function markScrolling(display) {
  const hidden = display.scrollWidth - display.clientWidth;
  display.classList.toggle("scrolls", hidden > 1);
  // Tab reaches a box that scrolls, and the arrow keys then scroll it: its end is not only for a mouse.
  if (hidden > 1) display.tabIndex = 0;
  else display.removeAttribute("tabindex");
  display.classList.toggle("scrolled", display.scrollLeft > 1);
  display.classList.toggle("at-end", display.scrollLeft >= hidden - 1);
}

// Formulas the server found in Markdown (app.projects.guidelines): each element holds its LaTeX as
// text, and data-display says whether it is a display.
export function renderFormulas(root) {
  if (!mathAvailable()) return;
  for (const element of root.querySelectorAll(".math[data-display]")) {
    window.katex.render(element.textContent, element, {
      ...KATEX_OPTIONS,
      displayMode: element.dataset.display === "block",
    });
    quietErrors(element);
    for (const display of element.querySelectorAll(".katex-display")) hintScrolling(display);
  }
}

// LaTeX that KaTeX cannot render, as readable source in a quiet style with the reason on hover:
// KaTeX's own error block is red, and a labeler reads red as "this step is wrong".
export function showSource(element, source, reason) {
  const code = document.createElement("code");
  code.className = "math-source";
  code.textContent = source;
  code.title = `Shown as source: ${reason.replace(/^(ParseError: )?KaTeX parse error: /, "")}`;
  element.replaceChildren(code);
}

function quietErrors(root) {
  for (const error of root.querySelectorAll(".katex-error")) {
    replaceWithSource(error, error.textContent, error.title || "KaTeX cannot render this");
  }
  for (const formula of root.querySelectorAll(".katex")) {
    const unknown = [...formula.querySelectorAll(".katex-html [style]")].find((e) => e.style.color === ERROR_RGB);
    if (!unknown) continue;
    const source = formula.querySelector("annotation")?.textContent ?? formula.textContent;
    replaceWithSource(formula.closest(".katex-display") ?? formula, source, `Undefined control sequence: ${unknown.textContent}`);
  }
}

function replaceWithSource(node, source, reason) {
  const holder = document.createElement("span");
  showSource(holder, source, reason);
  node.replaceWith(holder.firstChild);
}

// LaTeX that KaTeX cannot parse, rewritten to what it draws the same or nearly (a few dozen of
// the MATH demo's 6,706 steps showed as source): `eqnarray` is an array of right, centred and
// left columns; an array's @{…} and !{…} column specs (spacing between columns) go; \cline goes
// (KaTeX rules only whole rows); \multicolumn in an array keeps its text in its first column.
const EQNARRAY = /\\begin\{eqnarray(\*?)\}([\s\S]*?)\\end\{eqnarray\1\}/g;
const ARRAY_COLUMNS = /(\\begin\{array\}(?:\[[a-z]\])?)\{((?:[^{}]|\{[^{}]*\})*)\}/g;
const CLINE = /\\cline\{\d+-\d+\}/g;
const ARRAY_MULTICOLUMN = /\\multicolumn\{(\d+)\}\{[^{}]*\}\{((?:[^{}]|\{[^{}]*\})*)\}/g;

function forKatex(text) {
  if (!text.includes("\\")) return text;
  return text
    .replace(EQNARRAY, (_, star, body) => `\\[\\begin{array}{rcl}${body}\\end{array}\\]`)
    .replace(ARRAY_COLUMNS, (_, begin, columns) => `${begin}{${columns.replace(/[@!]\{[^{}]*\}/g, "")}}`)
    .replace(CLINE, "")
    .replace(ARRAY_MULTICOLUMN, (match, span, cell, offset, whole) =>
      // In a tabular, tabularsToArrays reads \multicolumn itself, captions included.
      insideTabular(whole, offset) ? match : `${cell}${" &".repeat(Number(span) - 1)}`,
    );
}

function insideTabular(text, offset) {
  const before = text.slice(0, offset);
  return before.lastIndexOf("\\begin{tabular}") > before.lastIndexOf("\\end{tabular}");
}

// KaTeX has no `tabular`. Its cells are text, so each becomes \text{…} (which keeps $…$ inside
// it as math) in an `array` with the same columns and rules. A \multicolumn spanning the whole
// table (a caption) goes above it; other \multicolumn cells keep their text in the first column.
// Paragraph columns (p{3cm}) have no KaTeX equivalent: the pattern leaves those tables alone.
const TABULAR = /\\begin\{tabular\}(?:\[[a-z]\])?\{([^{}]*)\}([\s\S]*?)\\end\{tabular\}/g;
const MULTICOLUMN = /^\\multicolumn\{(\d+)\}\{[^{}]*\}\{([\s\S]*)\}$/;

function tabularsToArrays(text) {
  return text.replace(TABULAR, (_, columns, body, offset, whole) => {
    const count = (columns.match(/[lcr]/g) ?? []).length;
    const captions = [];
    const rows = [];
    for (const row of body.split("\\\\")) {
      const [, rules, rest] = /^\s*((?:\\hline\s*)*)([\s\S]*)$/.exec(row);
      const cells = rest.trim() ? rest.split(/(?<!\\)&/).map((cell) => cell.trim()) : [];
      const span = cells.length === 1 ? MULTICOLUMN.exec(cells[0]) : null;
      if (span && Number(span[1]) === count && !rows.length && !rules.trim()) {
        captions.push(`\\text{${span[2]}}`);
        continue;
      }
      const converted = cells.flatMap((cell) => {
        const wide = MULTICOLUMN.exec(cell);
        if (wide) return [`\\text{${wide[2]}}`, ...Array(Number(wide[1]) - 1).fill("")];
        return [cell ? `\\text{${cell}}` : ""];
      });
      rows.push(`${rules}${converted.join(" & ")}`);
    }
    const array = `\\begin{array}{${columns}}${rows.join(" \\\\ ")}\\end{array}`;
    const table = captions.length ? `\\begin{gathered}${[...captions, array].join(" \\\\ ")}\\end{gathered}` : array;
    // Written inside math already ($$\begin{tabular}…$$), it needs no delimiters of its own.
    return insideMath(whole.slice(0, offset)) ? table : `\\[${table}\\]`;
  });
}

// Whether text ending here has opened math it has not closed: $$, $, \[ or \(.
function insideMath(before) {
  const unescaped = before.replace(/\\\\|\\\$/g, "");
  const displays = unescaped.split("$$").length - 1;
  const inlines = unescaped.replaceAll("$$", "").split("$").length - 1;
  const opened = (left, right) => unescaped.lastIndexOf(left) > unescaped.lastIndexOf(right);
  return displays % 2 === 1 || inlines % 2 === 1 || opened("\\[", "\\]") || opened("\\(", "\\)");
}

// MATH draws figures in Asymptote, inline as [asy]…[/asy]. The server draws them to sanitised
// SVG (GET …/figures/{n}); shown through <img>, an SVG cannot run scripts or fetch anything.
// Without a drawing (Asymptote not installed, or the code failed) the page shows a collapsed
// block with the source, the reason on hover, instead of a wall of code. A server without
// Asymptote says so on the page (body[data-figures=off]), and nothing is asked of it.
const ASY_BLOCK = /\[asy\]([\s\S]*?)\[\/asy\]/;

// A preview's text with each figure's code as "[figure]"; a preview cut inside a figure's code
// (a snippet of the problem's first characters) ends there too.
export function figuresAsWords(text) {
  return text.replace(/\[asy\][\s\S]*?(?:\[\/asy\]|$)/g, "[figure]");
}

export function renderProblemText(element, text, figureUrl) {
  // Its own letters set its direction: a problem in Hebrew or Arabic reads right to left.
  element.dir = "auto";
  renderWithFigures(element, text, (source, n) =>
    document.body.dataset.figures === "off" ? figureSource(source, null) : figure(source, figureUrl(n)),
  );
}

// Text with math around [asy] blocks, each block shown by `shown(source, n)`, or as math text
// alone where it has none.
function renderWithFigures(element, text, shown) {
  const parts = text.split(new RegExp(ASY_BLOCK.source, "g"));
  if (parts.length === 1) {
    renderMathText(element, text);
    return;
  }
  element.replaceChildren(
    ...parts.map((part, i) => {
      if (i % 2) return shown(part, (i - 1) / 2);
      const span = document.createElement("span");
      // A figure is a block of its own: the line breaks around its code would add blank lines.
      let text = i > 0 ? part.replace(/^[ \t]*\n/, "") : part;
      if (i < parts.length - 1) text = text.replace(/\n[ \t]*$/, "");
      renderMathText(span, text);
      return span;
    }),
  );
}

function figure(source, url) {
  const box = document.createElement("span");
  box.className = "asy-figure";
  const image = document.createElement("img");
  image.alt = "Figure of the problem";
  image.addEventListener("error", () => box.replaceWith(figureSource(source, url)), { once: true });
  image.src = url;
  box.append(image);
  return box;
}

function figureSource(source, url, why = "This server does not draw Asymptote figures (see make asymptote).") {
  const block = document.createElement("details");
  block.className = "asy-source";
  block.dir = "ltr";  // English words and code, in a right-to-left problem too
  const summary = document.createElement("summary");
  summary.textContent = "figure not shown (Asymptote source)";
  const code = document.createElement("pre");
  code.textContent = source.trim();
  block.append(summary, code);
  if (!url) {
    block.title = why;
    return block;
  }
  getJson(url).catch((error) => {
    block.title = error.message;
  });
  return block;
}

// PRM800K's last step: "# Answer", a blank line, then the answer as bare LaTeX ("106^\circ"),
// which has no delimiters for renderMathText to find. Imported records often end their last
// step with it ("So the answer is 5.\n\n# Answer\n\n5").
const ANSWER_SECTION = /(?:^|\n)# Answer[ \t]*\n\s*/;
// Words or lines in the answer ("5 apples each", a second paragraph) are shown as text: math mode
// would run the words together in italics. Words inside commands (\text{apples}) do not count.
function isProse(answer) {
  if (answer.includes("\n")) return true;
  const bare = answer.replace(/\\[a-zA-Z]+(\{[^{}]*\})?/g, " ");
  return /[a-zA-Z]{3,}|[a-zA-Z]{2,}\s+[a-zA-Z]{2,}/.test(bare);
}

// One step of a solution: text with math, and an answer section with its answer as math.
export function renderStepText(element, text) {
  element.dir = "auto";  // as a problem's (renderProblemText)
  if (ASY_BLOCK.test(text)) {
    // Drawn for problems only; a step's code as math text set its labels as formulas.
    renderWithFigures(element, text, (source) =>
      figureSource(source, null, "Figures in steps are not drawn: open to read the Asymptote source."),
    );
    return;
  }
  const heading = ANSWER_SECTION.exec(text);
  const answer = heading ? text.slice(heading.index + heading[0].length).trim() : "";
  if (!heading || !answer || !mathAvailable()) {
    renderMathText(element, text);
    return;
  }
  const parts = [];
  const before = text.slice(0, heading.index).trim();
  if (before) {
    const lead = document.createElement("span");
    lead.className = "answer-lead";
    renderMathText(lead, before);
    parts.push(lead);
  }
  const title = document.createElement("span");
  title.className = "answer-heading";
  // In its own run, which a right-to-left step would otherwise turn into "Answer #".
  const titleWords = document.createElement("span");
  titleWords.dir = "ltr";
  titleWords.textContent = "# Answer";
  title.append(titleWords);
  const value = document.createElement("span");
  value.className = "answer-value";
  // An answer with its own delimiters, or in words, is text with math like the rest of the step.
  // An escaped dollar (MATH's "\$32,\!348") is a dollar sign in LaTeX, not a delimiter.
  if (hasDelimiter(answer) || isProse(answer)) renderMathText(value, answer);
  // In display style, as the boxed answer above it and the expected answer are: in text style a
  // fraction is set at half their size.
  else renderInlineAnswer(value, answer, { displayStyle: true });
  element.replaceChildren(...parts, title, value);
}

const hasDelimiter = (text) => /(?<!\\)\$/.test(text);

// The expected answer, boxed as PRM800K shows it. Answers are LaTeX without delimiters
// ("\frac{14}{3}"); one KaTeX cannot parse is shown as text in the same box.
export function renderAnswer(element, answer) {
  element.replaceChildren();
  element.classList.toggle("answer-none", answer === null || answer === "");
  if (answer === null || answer === "") {
    element.textContent = "not given";
    return;
  }
  if (mathAvailable() && !hasDelimiter(answer)) {
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

// A final answer inline, as in the picks inspector: the same LaTeX without a box, and as quiet
// source where KaTeX cannot parse it.
export function renderInlineAnswer(element, answer, { displayStyle = false } = {}) {
  if (!mathAvailable() || hasDelimiter(answer)) {
    renderMathText(element, answer);
    return;
  }
  try {
    window.katex.render(displayStyle ? `\\displaystyle ${answer}` : answer, element, { ...KATEX_OPTIONS, throwOnError: true });
  } catch (error) {
    showSource(element, answer, String(error.message ?? error));
  }
}

// "\boxed{…}" written outside any math delimiters (common in model-written final steps).
function renderBareBoxes(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
    acceptNode: (node) =>
      node.parentElement.closest(".katex, .math-source") || !node.data.includes("\\boxed{")
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
