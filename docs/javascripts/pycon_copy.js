// The copy button of a console example (a ```pycon block, which starts with ">>> ")
// copies its code only: the lines after ">>> " and "... " prompts, without the
// prompts and the output. mkdocs-material's copy button (content.code.copy) copies
// the `data-copy` attribute of the code element where one is set.
"use strict";

function pyconCode(text) {
  const code = [];
  for (const line of text.split("\n")) {
    if (line.startsWith(">>> ") || line.startsWith("... ")) {
      code.push(line.slice(4));
    } else if (line === ">>>" || line === "...") {
      code.push("");
    }
  }
  return code.join("\n").trimEnd() + "\n";
}

function markPyconBlocks() {
  for (const code of document.querySelectorAll(".highlight code")) {
    if (code.textContent.startsWith(">>> ")) {
      code.setAttribute("data-copy", pyconCode(code.textContent));
    }
  }
}

if (typeof document$ !== "undefined") {
  document$.subscribe(markPyconBlocks); // mkdocs-material: after every page load
} else if (typeof document !== "undefined") {
  document.addEventListener("DOMContentLoaded", markPyconBlocks);
}

if (typeof module !== "undefined") {
  module.exports = { pyconCode };
}
