#!/bin/sh
# claude_code.sh: an adapter that answers with Claude Code ("claude -p").
#
# It renders the payload on stdin into one prompt with "agent-bridge prompt"
# and feeds it to "claude -p --output-format stream-json --verbose" on stdin.
# "agent-bridge adapter-stream claude" turns claude's events into the reply
# (stdout) and progress records (fd 3: tool calls, text, usage and cost, the
# session id). The model is the invited participant's profile.model, when
# set. When the payload carries a session id (session.id, kept by the
# coordinator per thread and participant), claude resumes it (--resume); if
# claude no longer knows it, the run is retried once as a new session.
# Extra claude flags (permissions, say) come from AGENT_BRIDGE_CLAUDE_ARGS,
# split on spaces; set it in the agent entry's "env".
# claude retries a failing model call 10 times by default (minutes for a
# bad key); this adapter caps it at CLAUDE_CODE_MAX_RETRIES=2 unless the
# environment sets it, so an error reaches the thread in seconds. Each
# retry shows as progress ("retrying after 401 (attempt 2 of 3)").
#
# Exit status: 0 with a reply; non-zero when claude or the run failed (the
# reason on stderr); 127 when claude or agent-bridge is missing.
set -eu

me=claude_code.sh
bin=${AGENT_BRIDGE_BIN:-agent-bridge}
if ! command -v "$bin" >/dev/null 2>&1; then
	echo "$me: cannot find the agent-bridge binary ($bin): set AGENT_BRIDGE_BIN or put agent-bridge on PATH" >&2
	exit 127
fi
if ! command -v claude >/dev/null 2>&1; then
	echo "$me: the claude CLI is not on PATH ($PATH): install Claude Code or add its folder to the coordinator's PATH (services get a minimal PATH)" >&2
	exit 127
fi

CLAUDE_CODE_MAX_RETRIES=${CLAUDE_CODE_MAX_RETRIES:-2}
export CLAUDE_CODE_MAX_RETRIES

tmp=$(mktemp -d "${TMPDIR:-/tmp}/agent-bridge-claude.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/payload.json"
"$bin" prompt <"$tmp/payload.json" >"$tmp/prompt.txt"
model=$("$bin" prompt --field participant.profile.model <"$tmp/payload.json")
session=$("$bin" prompt --field session.id <"$tmp/payload.json")

# run_claude SESSION: one claude run piped through adapter-stream, resuming
# SESSION when not empty. Its status is adapter-stream's: 3 means claude
# never started the run (a session it does not know, say). claude's own
# status is kept in $tmp/claude.rc, as POSIX sh has no pipefail.
run_claude() {
	resume=$1
	set -- -p --output-format stream-json --verbose
	# "default" is the agent's own choice: no --model.
	if [ -n "$model" ] && [ "$model" != default ]; then
		set -- "$@" --model "$model"
	fi
	if [ -n "$resume" ]; then
		set -- "$@" --resume "$resume"
	fi
	# shellcheck disable=SC2086 # word splitting of the extra flags is intended
	{
		rc=0
		claude "$@" ${AGENT_BRIDGE_CLAUDE_ARGS:-} <"$tmp/prompt.txt" || rc=$?
		echo "$rc" >"$tmp/claude.rc"
	} | "$bin" adapter-stream claude
}

status=0
run_claude "$session" || status=$?
if [ "$status" -eq 3 ] && [ -n "$session" ]; then
	echo "$me: claude could not resume session $session (exit $(cat "$tmp/claude.rc")); starting a new session" >&2
	# A new session has seen nothing: send it the whole conversation.
	"$bin" prompt --fresh <"$tmp/payload.json" >"$tmp/prompt.txt"
	status=0
	run_claude "" || status=$?
fi
if [ "$status" -eq 0 ] && [ "$(cat "$tmp/claude.rc")" != 0 ]; then
	echo "$me: claude exited with status $(cat "$tmp/claude.rc")" >&2
	exit 1
fi
exit "$status"
