#!/bin/sh
# codex.sh: an adapter that answers with the Codex CLI ("codex exec").
#
# It renders the payload on stdin into one prompt with "agent-bridge prompt"
# and feeds it to "codex exec" on stdin ("-" as the prompt). The model is the
# invited participant's profile.model (-m), when set, for a new session. Each (thread,
# participant) pair keeps one codex session: its id is read from the
# thread.started event of "codex exec --json" and stored in
#   ${XDG_STATE_HOME:-$HOME/.local/state}/agent-bridge/codex/<thread>/<participant>
# so the next message in the thread resumes it ("codex exec resume <id>").
# A session codex no longer knows is dropped and a new one started. The reply
# is codex's last message (-o). Extra codex flags (sandbox, approvals) come
# from AGENT_BRIDGE_CODEX_ARGS, split on spaces; set it in the agent entry's
# "env".
#
# Exit status: codex's own, or 127 when codex or agent-bridge is missing.
set -eu

me=codex.sh
bin=${AGENT_BRIDGE_BIN:-agent-bridge}
if ! command -v "$bin" >/dev/null 2>&1; then
	echo "$me: cannot find the agent-bridge binary ($bin): set AGENT_BRIDGE_BIN or put agent-bridge on PATH" >&2
	exit 127
fi
if ! command -v codex >/dev/null 2>&1; then
	echo "$me: the codex CLI is not on PATH ($PATH): install it or add its folder to the coordinator's PATH (services get a minimal PATH)" >&2
	exit 127
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/agent-bridge-codex.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/payload.json"
"$bin" prompt <"$tmp/payload.json" >"$tmp/prompt.txt"
field() { "$bin" prompt --field "$1" <"$tmp/payload.json"; }
model=$(field participant.profile.model)
thread=$(field thread_id)
participant=$(field participant.id)

# Where the session id lives; none when there is no state folder or the
# ids could escape it.
session_file=
state_root=${XDG_STATE_HOME:-}
if [ -z "$state_root" ] && [ -n "${HOME:-}" ]; then
	state_root=$HOME/.local/state
fi
case $thread/$participant in
*/*/* | .* | */.* | /* | */) ;;
*)
	if [ -n "$state_root" ]; then
		session_file=$state_root/agent-bridge/codex/$thread/$participant
	fi
	;;
esac
if [ -z "$session_file" ]; then
	echo "$me: no state folder (XDG_STATE_HOME, HOME) or unusual ids: the codex session is not kept" >&2
fi
session=
if [ -n "$session_file" ] && [ -f "$session_file" ]; then
	session=$(cat "$session_file")
fi

# run_codex SESSION: one codex exec, resuming SESSION when not empty.
run_codex() {
	set -- exec --json --skip-git-repo-check -o "$tmp/last.txt"
	# A resumed session keeps the model it was started with.
	if [ -n "$model" ] && [ -z "$session" ]; then
		set -- "$@" -m "$model"
	fi
	# shellcheck disable=SC2086 # word splitting of the extra flags is intended
	set -- "$@" ${AGENT_BRIDGE_CODEX_ARGS:-}
	if [ -n "$session" ]; then
		set -- "$@" resume "$session"
	fi
	codex "$@" - <"$tmp/prompt.txt" >"$tmp/events.jsonl"
}

status=0
run_codex || status=$?
if [ "$status" -ne 0 ] && [ -n "$session" ]; then
	echo "$me: resuming codex session $session failed (exit $status); starting a new session" >&2
	rm -f "$session_file"
	session=
	status=0
	run_codex || status=$?
fi
if [ "$status" -ne 0 ]; then
	exit "$status"
fi

new=$(sed -n '/"thread\.started"/s/.*"thread_id"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$tmp/events.jsonl" | head -n 1)
if [ -n "$session_file" ] && [ -n "$new" ] && [ "$new" != "$session" ]; then
	mkdir -p "$(dirname "$session_file")"
	printf '%s\n' "$new" >"$session_file.tmp"
	mv "$session_file.tmp" "$session_file"
fi
if [ -f "$tmp/last.txt" ]; then
	cat "$tmp/last.txt"
fi
