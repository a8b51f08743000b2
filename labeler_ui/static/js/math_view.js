// Pages that show problems and steps (the Reports tab, the read-only label view): the server
// writes them as escaped text marked `data-math`; this turns the math in that text into KaTeX,
// through the same functions as the labeling page. Markdown the server rendered (guidelines)
// marks its formulas itself.
import { renderAnswer, renderFormulas, renderMathText, renderStepText } from "./math.js";

const RENDER = { text: renderMathText, step: renderStepText, answer: renderAnswer };

for (const element of document.querySelectorAll("[data-math]")) {
  const text = element.textContent;
  RENDER[element.dataset.math](element, element.dataset.math === "answer" && !text ? null : text);
}

renderFormulas(document);
