// Pages that show problems, steps and labels read-only (the Reports and Labels tabs, one label,
// My stats): the server writes them as escaped text marked `data-math`; this turns the math in
// that text into KaTeX, through the same functions as the labeling page. Markdown the server
// rendered (guidelines) marks its formulas itself.
import { renderAnswer, renderFormulas, renderMathText, renderStepText } from "./math.js";

const RENDER = {
  text: renderMathText,
  line: (element, text) => renderMathText(element, text, { inline: true }),
  step: renderStepText,
  answer: renderAnswer,
};

for (const element of document.querySelectorAll("[data-math]")) {
  RENDER[element.dataset.math](element, element.textContent);
}

renderFormulas(document);
