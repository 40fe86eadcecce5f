#!/bin/sh
# codex.sh: an adapter that answers with the Codex CLI ("codex exec").
#
# It renders the payload on stdin into one prompt with "agent-bridge prompt"
# and feeds it to "codex exec --json" on stdin ("-" as the prompt).
# "agent-bridge adapter-stream codex" turns codex's events into the reply
# (its last agent message, on stdout) and progress records (fd 3: commands,
# file changes, text, usage, the session id). The model is the invited
# participant's profile.model (-m), when set, for a new session. When the
# payload carries a session id (session.id, kept by the coordinator per
# thread and participant), codex resumes it ("codex exec resume <id>"); if
# codex no longer knows it, the run is retried once as a new session. Extra
# codex flags (sandbox, approvals) come from AGENT_BRIDGE_CODEX_ARGS, split
# on spaces; set it in the agent entry's "env".
#
# Exit status: 0 with a reply; non-zero when codex or the run failed (the
# reason on stderr); 127 when codex or agent-bridge is missing.
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
model=$("$bin" prompt --field participant.profile.model <"$tmp/payload.json")
session=$("$bin" prompt --field session.id <"$tmp/payload.json")

# run_codex SESSION: one codex exec piped through adapter-stream, resuming
# SESSION when not empty. Its status is adapter-stream's: 3 means codex
# never started the run (a session it does not know, say). codex's own
# status is kept in $tmp/codex.rc, as POSIX sh has no pipefail.
run_codex() {
	resume=$1
	set -- exec --json --skip-git-repo-check
	# A resumed session keeps the model it was started with.
	if [ -n "$model" ] && [ -z "$resume" ]; then
		set -- "$@" -m "$model"
	fi
	# shellcheck disable=SC2086 # word splitting of the extra flags is intended
	set -- "$@" ${AGENT_BRIDGE_CODEX_ARGS:-}
	if [ -n "$resume" ]; then
		set -- "$@" resume "$resume"
	fi
	{
		rc=0
		codex "$@" - <"$tmp/prompt.txt" || rc=$?
		echo "$rc" >"$tmp/codex.rc"
	} | "$bin" adapter-stream codex
}

status=0
run_codex "$session" || status=$?
if [ "$status" -eq 3 ] && [ -n "$session" ]; then
	echo "$me: codex could not resume session $session (exit $(cat "$tmp/codex.rc")); starting a new session" >&2
	# A new session has seen nothing: send it the whole conversation.
	"$bin" prompt --fresh <"$tmp/payload.json" >"$tmp/prompt.txt"
	status=0
	run_codex "" || status=$?
fi
if [ "$status" -eq 0 ] && [ "$(cat "$tmp/codex.rc")" != 0 ]; then
	echo "$me: codex exited with status $(cat "$tmp/codex.rc")" >&2
	exit 1
fi
exit "$status"
