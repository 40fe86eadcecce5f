// hooks.js: the one small event module. The views never import each other:
// what one view asks of another (open a thread, paint a receipt, refresh the
// state panel) it calls through `hooks`, which app.js fills with the views'
// functions before anything runs. So the import graph has no cycle: app.js
// imports the views, and a view imports only leaf modules (api, dom,
// shared, markdown, controls) and this one.

export const hooks = {};
