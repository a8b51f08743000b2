// Pages that show labels read-only (My stats, one label): the server put each text in as
// text; this renders its math as the labeling page does, from the element's own textContent.

import { renderAnswer, renderMathText, renderStepText } from "./math.js";

const RENDER = { text: renderMathText, step: renderStepText, answer: renderAnswer };

for (const element of document.querySelectorAll("[data-math]")) {
  RENDER[element.dataset.math](element, element.textContent);
}
