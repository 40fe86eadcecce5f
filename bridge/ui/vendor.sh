#!/usr/bin/env bash
# vendor.sh: refreshes the UI's third-party ES modules from npm.
#
# The UI has no build step: the browser loads these files as they are from
# static/vendor/. This script fetches the pinned packages with `npm pack`
# (the registry's own tarballs, checked against their integrity hashes by
# npm), copies the one ES-module file and the license of each, and records
# the versions in static/vendor/README.md. To upgrade, change a version
# below, run the script, run the UI tests, and commit the result.
#
#   bridge/ui/vendor.sh
set -euo pipefail

MARKED_VERSION=18.2.1
DOMPURIFY_VERSION=3.4.18
DIFF2HTML_VERSION=3.4.56

here="$(cd "$(dirname "$0")" && pwd)"
out="$here/static/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cd "$work"
npm pack --silent "marked@$MARKED_VERSION" "dompurify@$DOMPURIFY_VERSION" "diff2html@$DIFF2HTML_VERSION" >/dev/null
mkdir marked dompurify diff2html
tar -xzf "marked-$MARKED_VERSION.tgz" -C marked
tar -xzf "dompurify-$DOMPURIFY_VERSION.tgz" -C dompurify
tar -xzf "diff2html-$DIFF2HTML_VERSION.tgz" -C diff2html

mkdir -p "$out"
# The source-map comments point at files we do not ship; without them the
# browser's developer tools do not ask the bridge for a missing map.
sed '/^\/\/# sourceMappingURL=/d' marked/package/lib/marked.esm.js >"$out/marked.esm.js"
sed '/^\/\/# sourceMappingURL=/d' dompurify/package/dist/purify.es.mjs >"$out/purify.es.js"
# diff2html publishes its browser bundle as UMD only (its ES build imports
# other packages by name); given a module object, the bundle fills it, and
# the wrapper exports what it filled.
{
  echo "// diff2html $DIFF2HTML_VERSION (bundles/js/diff2html.min.js) as an ES module; written by bridge/ui/vendor.sh."
  echo "const module = { exports: {} };"
  echo "const exports = module.exports;"
  sed '/^\/\/# sourceMappingURL=/d' diff2html/package/bundles/js/diff2html.min.js
  echo
  echo "export const { parse, html } = module.exports;"
  echo "export default module.exports;"
} >"$out/diff2html.js"
cp diff2html/package/bundles/css/diff2html.min.css "$out/diff2html.min.css"
cp diff2html/package/LICENSE.md "$out/LICENSE-diff2html.txt"
cp marked/package/LICENSE "$out/LICENSE-marked.txt"
cp dompurify/package/LICENSE "$out/LICENSE-dompurify.txt"

for f in "$out"/*.js; do
  size=$(wc -c <"$f")
  if [ "$size" -gt 1000000 ]; then
    echo "vendor.sh: $f is $size bytes; CI refuses tracked files over 1 MB" >&2
    exit 1
  fi
done

cat >"$out/README.md" <<MD
# Vendored browser modules

Written by \`bridge/ui/vendor.sh\` from the npm registry; do not edit by hand.

| file | package | version | license |
|---|---|---|---|
| marked.esm.js | [marked](https://www.npmjs.com/package/marked) (lib/marked.esm.js) | $MARKED_VERSION | MIT ([LICENSE-marked.txt](LICENSE-marked.txt)) |
| purify.es.js | [dompurify](https://www.npmjs.com/package/dompurify) (dist/purify.es.mjs) | $DOMPURIFY_VERSION | MPL-2.0 or Apache-2.0 ([LICENSE-dompurify.txt](LICENSE-dompurify.txt)) |
| diff2html.js, diff2html.min.css | [diff2html](https://www.npmjs.com/package/diff2html) (bundles/js/diff2html.min.js, bundles/css/diff2html.min.css) | $DIFF2HTML_VERSION | MIT ([LICENSE-diff2html.txt](LICENSE-diff2html.txt)) |

The only change from the published files is the removed \`sourceMappingURL\` comment, and
diff2html's UMD bundle wrapped as an ES module (a \`module\` object it fills, and its exports).
MD
echo "vendored marked $MARKED_VERSION, dompurify $DOMPURIFY_VERSION and diff2html $DIFF2HTML_VERSION into $out"
