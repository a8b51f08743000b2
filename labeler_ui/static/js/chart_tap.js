// The overview's bar charts and sparklines give each bar's count in its <title>: a tooltip that a
// mouse shows on hover and a touch screen never shows, so on a phone the counts were nowhere to
// be seen. A tap (or a click) on a bar writes the same words under the chart and marks the bar.

function readout(chart) {
  const line = document.createElement("span");
  line.className = "chart-readout small";
  // Made before any tap, so that a screen reader hears its first words too.
  line.setAttribute("aria-live", "polite");
  // A sparkline's count follows it in its table cell: the words go under both.
  const cell = chart.closest("td");
  if (cell) cell.append(line);
  else chart.after(line);
  return line;
}

function watch(chart, barAt) {
  const line = readout(chart);
  chart.addEventListener("click", (event) => {
    const bar = barAt(event);
    if (!bar) return;
    for (const other of chart.querySelectorAll(".picked")) other.classList.remove("picked");
    bar.classList.add("picked");
    line.textContent = bar.querySelector("title").textContent;
  });
}

for (const chart of document.querySelectorAll("svg.bar-chart")) {
  // Each bar's whole column is its target (manage/_labels_chart.html).
  watch(chart, (event) => event.target.closest(".bar"));
}

for (const chart of document.querySelectorAll("svg.sparkline")) {
  // A sparkline's bars are 4px wide, narrower than a fingertip: the day under the tap is found by
  // where it fell across the line.
  const bars = chart.querySelectorAll("rect");
  watch(chart, (event) => {
    const box = chart.getBoundingClientRect();
    const i = Math.floor(((event.clientX - box.left) / box.width) * bars.length);
    return bars[Math.min(bars.length - 1, Math.max(0, i))];
  });
}
