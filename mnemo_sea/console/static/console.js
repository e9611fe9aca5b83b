// The console's only script: small conveniences, none needed to read a page.
document.addEventListener("DOMContentLoaded", () => {
  // "Back" goes back in the history when there is one (the link itself leads home).
  for (const link of document.querySelectorAll("[data-back]")) {
    link.addEventListener("click", (event) => {
      if (history.length > 1) {
        event.preventDefault();
        history.back();
      }
    });
  }
  // A slider or date field marked data-autosubmit sends its form when it changes; a slider shows
  // the value it points at while it moves. A slider over a list of values (data-values, e.g. the
  // moments a record changed) sets the field named by data-sets to the one it points at first,
  // so the form sends that value rather than the slider's position.
  for (const field of document.querySelectorAll("[data-autosubmit]")) {
    const values = field.dataset.values ? JSON.parse(field.dataset.values) : null;
    const target = field.dataset.sets && document.getElementById(field.dataset.sets);
    field.addEventListener("change", () => {
      if (values && target) {
        target.value = values[field.value] ?? "";
      }
      field.form.submit();
    });
    const shown = field.dataset.shows && document.getElementById(field.dataset.shows);
    const labels = field.dataset.labels ? JSON.parse(field.dataset.labels) : null;
    if (shown && labels) {
      field.addEventListener("input", () => { shown.textContent = labels[field.value] || ""; });
    }
  }
});
