#!/bin/sh
# claude_code.sh: an adapter that answers with Claude Code ("claude -p").
#
# It renders the payload on stdin into one prompt (primer, conversation so
# far, the message to answer) with "agent-bridge prompt" and feeds it to
# "claude -p" on stdin; claude's stdout is the reply. The model is the invited
# participant's profile.model, when set. Extra claude flags (permissions, say)
# come from AGENT_BRIDGE_CLAUDE_ARGS, split on spaces; set it in the agent
# entry's "env".
#
# Exit status: claude's own, or 127 when claude or agent-bridge is missing.
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

tmp=$(mktemp -d "${TMPDIR:-/tmp}/agent-bridge-claude.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/payload.json"
"$bin" prompt <"$tmp/payload.json" >"$tmp/prompt.txt"
model=$("$bin" prompt --field participant.profile.model <"$tmp/payload.json")

set -- -p
if [ -n "$model" ]; then
	set -- "$@" --model "$model"
fi
# shellcheck disable=SC2086 # word splitting of the extra flags is intended
claude "$@" ${AGENT_BRIDGE_CLAUDE_ARGS:-} <"$tmp/prompt.txt"
