// dom.js: the two DOM helpers every module of the UI uses. Text only ever
// reaches the page through textContent.

// $ returns the element with the given id.
export const $ = (id) => document.getElementById(id);

// el creates an element with an optional class and text.
export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}
