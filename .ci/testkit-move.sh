#!/usr/bin/env bash
# .ci/testkit-move.sh: moves the test-support packages under internal/testkit/
# (issue 44, "test-support packages stand apart") and rewrites every path that
# names them: Go imports and build paths, the docs, the CI scripts.
#
# It is idempotent: run it again on a tree where the move is done and it
# changes nothing; run it on a branch that still names the old paths (or
# that added a file in an old folder) and it moves and rewrites what is
# left. So a branch merged after the move is fixed with one command:
#
#   .ci/testkit-move.sh && git add -A && git commit -m '...'
#
# It needs git, sed and gofmt, and runs from any folder inside the tree.
set -euo pipefail
cd "$(dirname "$0")/.."

# old folder -> new folder, both from the module root.
moves=(
	internal/testutil:internal/testkit/testutil
	internal/testbridge:internal/testkit/testbridge
	internal/fakemodel:internal/testkit/fakemodel
	internal/fakepush:internal/testkit/fakepush
	internal/pgtest:internal/testkit/pgtest
	internal/storetest:internal/testkit/storetest
	internal/tailnettest:internal/testkit/tailnettest
	internal/wakebench:internal/testkit/wakebench
	adapters/adapterstest:internal/testkit/adapterstest
	adapters/internal/fakeadapter:internal/testkit/fakeadapter
	adapters/internal/fakecli:internal/testkit/fakecli
	coordinator/internal/fakeacp:internal/testkit/fakeacp
)

# 1. The files: every tracked file still under an old folder moves to the
# same place under the new one (the whole folder on the first run; on a
# merged branch, only what it added there).
for m in "${moves[@]}"; do
	old=${m%%:*} new=${m##*:}
	git ls-files -z -- "$old/" | while IFS= read -r -d '' f; do
		dest="$new/${f#"$old"/}"
		mkdir -p "$(dirname "$dest")"
		git mv -f -- "$f" "$dest"
	done
	# What git does not track (build output, editors' files) stays
	# behind; an empty old folder goes.
	if [ -d "$old" ]; then find "$old" -depth -type d -empty -delete; fi
done

# 2. The names: each old path, wherever it is a whole path segment, becomes
# the new one. The new paths do not contain the old ones
# (internal/testkit/testutil has no "internal/testutil"), so a second run
# finds nothing to change.
expr=()
for m in "${moves[@]}"; do
	old=${m%%:*} new=${m##*:}
	# old path not preceded by a name character or another path's
	# segment, and not followed by a name character.
	expr+=(-e "s#\(^\|[^A-Za-z0-9_./-]\|\.\/\|agent-bridge/\)${old//\//\\/}\([^A-Za-z0-9_-]\|\$\)#\1${new//\//\\/}\2#g")
done
files=()
while IFS= read -r -d '' f; do
	case "$f" in
	*/testdata/*.md) ;; # prose about the fixtures
	.ci/testkit-move.sh | .ci/clis/* | .ci/axe/* | */testdata/* | bridge/ui/static/vendor/*) continue ;;
	esac
	files+=("$f")
done < <(git ls-files -z -- '*.go' '*.md' '*.sh' '.ci/*' 'Dockerfile' '.goreleaser.yaml' 'go.mod')
changed=()
for f in "${files[@]}"; do
	[ -f "$f" ] || continue
	if grep -qE 'internal/(testutil|testbridge|fakemodel|fakepush|pgtest|storetest|tailnettest|wakebench|fakeadapter|fakecli|fakeacp)|adapters/adapterstest' "$f"; then
		before=$(cksum <"$f")
		sed -i "${expr[@]}" "$f"
		if [ "$(cksum <"$f")" != "$before" ]; then changed+=("$f"); fi
	fi
done

# 3. A rewritten import may sort differently in its block: gofmt sorts it.
gofiles=()
for f in "${changed[@]}"; do
	case "$f" in *.go) gofiles+=("$f") ;; esac
done
if [ "${#gofiles[@]}" -gt 0 ]; then gofmt -w "${gofiles[@]}"; fi

echo "testkit-move: ${#changed[@]} file(s) rewritten"
for f in "${changed[@]}"; do echo "  $f"; done
