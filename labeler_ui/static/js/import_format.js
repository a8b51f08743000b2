// The import page guesses a file's format from its first line and picks that radio button,
// saying what it saw. Only a guess for convenience: the server validates every line anyway.

const SNIFF_BYTES = 1 << 20;
const NAMES = { prm800k: "PRM800K", math: "MATH problems", solutions: "Candidate solutions" };
const MATH_KEYS = ["solution", "subject", "type", "level", "unique_id"];

/** {format, why} for the first line of a JSONL file; format is null when there is no telling. */
export function guessFormat(line) {
  let record;
  try {
    record = JSON.parse(line);
  } catch {
    return { format: null, why: "its first line is not JSON" };
  }
  if (record === null || typeof record !== "object" || Array.isArray(record)) {
    return { format: null, why: "its first line is not a JSON object" };
  }
  const has = (key) => Object.hasOwn(record, key);
  if (has("question") || has("label")) {
    const keys = ["question", "label"].filter(has).map((key) => `"${key}"`);
    return { format: "prm800k", why: `the first line has ${keys.join(" and ")}` };
  }
  for (const key of ["steps", "text", "problem_id"]) {
    if (has(key)) return { format: "solutions", why: `the first line has "${key}"` };
  }
  if (has("problem")) {
    const extra = MATH_KEYS.find(has);
    const why = extra ? `the first line has "problem" and "${extra}"` : 'the first line has "problem" and no steps';
    return { format: "math", why };
  }
  return { format: null, why: "its first line has none of the keys of a known format" };
}

function firstLine(text) {
  return text.replace(/^\uFEFF/, "").split(/\r?\n/).find((line) => line.trim() !== "") ?? "";
}

// Files that are no JSONL text at all, known by their first bytes, named as the server names
// them (app.imports.reader): their NUL bytes said only that they were not text.
const NOT_JSONL = [
  [[0x50, 0x4b, 0x03, 0x04], "the file is a zip archive: upload the .jsonl file inside it"],
  [[0x1f, 0x8b], "the file is gzip-compressed: decompress it (gunzip) and upload the .jsonl file"],
  [[0x50, 0x41, 0x52, 0x31], "the file is a Parquet file: imports read JSONL, one JSON object a line"],
];

/** {format, why, unreadable} for a file of `size` bytes from its first `bytes` (a Uint8Array);
 * `unreadable`: no format will take it as it is, so choosing one is no help. */
export function guessFile(bytes, size) {
  if (size === 0) return { format: null, why: "the file is empty", unreadable: true };
  const known = NOT_JSONL.find(([magic]) => magic.every((byte, i) => bytes[i] === byte));
  if (known) return { format: null, why: known[1], unreadable: true };
  if ((bytes[0] === 0xff && bytes[1] === 0xfe) || (bytes[0] === 0xfe && bytes[1] === 0xff)) {
    return { format: null, why: "the file is UTF-16 text, not UTF-8: save it as UTF-8", unreadable: true };
  }
  if (bytes.subarray(0, 4096).includes(0)) {
    return { format: null, why: "the file holds NUL bytes: it is not UTF-8 text", unreadable: true };
  }
  const text = new TextDecoder().decode(bytes);
  const line = firstLine(text);
  if (!line) {
    if (size > bytes.length) return { format: null, why: "its first megabyte has only blank lines" };
    return { format: null, why: "the file has only blank lines", unreadable: true };
  }
  if (size > bytes.length && !text.slice(text.indexOf(line)).includes("\n")) {
    return { format: null, why: "its first line is longer than the megabyte this page reads" };
  }
  return guessFormat(line);
}

const form = document.querySelector("form[data-import]");
const input = form?.querySelector('input[type="file"]');
const note = document.getElementById("format-guess");

async function sniff() {
  const file = input.files[0];
  if (!file) {
    note.hidden = true;
    return;
  }
  const bytes = new Uint8Array(await file.slice(0, SNIFF_BYTES).arrayBuffer());
  const { format, why, unreadable } = guessFile(bytes, file.size);
  if (format) {
    form.querySelector(`input[name="format"][value="${format}"]`).checked = true;
    note.textContent = `Looks like ${NAMES[format]}: ${why}. Change it below if that is wrong.`;
  } else if (unreadable) {
    note.textContent = `This file cannot be imported as it is: ${why}.`;
  } else {
    note.textContent = `Could not tell the format: ${why}. Choose it below.`;
  }
  note.hidden = false;
}

if (form && input && note) {
  input.addEventListener("change", sniff);
  // A file dropped anywhere on the form is taken as if chosen with the button.
  form.addEventListener("dragover", (event) => event.preventDefault());
  form.addEventListener("drop", (event) => {
    event.preventDefault();
    if (!event.dataTransfer?.files.length) return;
    input.files = event.dataTransfer.files;
    input.dispatchEvent(new Event("change"));
  });
}
