// Pages that show problems, steps and labels read-only (the Reports and Labels tabs, one label,
// My stats): the server writes them as escaped text marked `data-math`; this turns the math in
// that text into KaTeX, through the same functions as the labeling page. Markdown the server
// rendered (guidelines) marks its formulas itself.
import { figuresAsWords, renderAnswer, renderFormulas, renderMathText, renderProblemText, renderStepText } from "./math.js";

const RENDER = {
  text: renderMathText,
  // A problem's [asy] figures drawn, as on the labeling page, not their code as text.
  problem: (element, text) =>
    renderProblemText(element, text, (n) => `/api/v1/problems/${element.dataset.problemId}/figures/${n}`),
  // A preview has no room for a figure: it says there is one.
  line: (element, text) => renderMathText(element, figuresAsWords(text), { inline: true }),
  step: renderStepText,
  answer: renderAnswer,
};

// A one-line preview ends in CSS's ellipsis, which cuts text at a character but, in Chromium,
// clips a formula (an inline block) part-way, with no ellipsis: "what is f(g(−2" read as the
// problem. From the first formula that crosses the edge on, the line is set aside and "…" ends
// it; again whenever the line's width changes.
function fitLine(element) {
  element.querySelector(":scope > .line-end")?.remove();
  const setAside = element.querySelector(":scope > .line-cut");
  if (setAside) setAside.replaceWith(...setAside.childNodes);
  if (element.scrollWidth <= element.clientWidth) return;
  // A formula that ends within an ellipsis of the edge leaves CSS no text to cut for its own.
  const edge = element.getBoundingClientRect().right - parseFloat(getComputedStyle(element).fontSize);
  let crossing = [...element.children].find((child) => child.getBoundingClientRect().right > edge);
  // A line that opens with a formula too wide for it keeps that formula, clipped, rather than
  // show nothing but "…".
  if (crossing && !crossing.previousSibling?.textContent.trim()) crossing = crossing.nextElementSibling;
  if (!crossing) return;
  const cut = document.createElement("span");
  cut.className = "line-cut";
  cut.hidden = true;
  const end = document.createElement("span");
  end.className = "line-end";
  end.textContent = "…";
  crossing.before(cut, end);
  while (end.nextSibling) cut.append(end.nextSibling);
}

const lines = new ResizeObserver((entries) => entries.forEach((entry) => fitLine(entry.target)));

for (const element of document.querySelectorAll("[data-math]")) {
  RENDER[element.dataset.math](element, element.textContent);
  if (element.dataset.math === "line") lines.observe(element);
}
// KaTeX's fonts change formulas' widths when they arrive, and the lines' own widths not at all.
document.fonts.ready.then(() => document.querySelectorAll('[data-math="line"]').forEach(fitLine));

renderFormulas(document);
