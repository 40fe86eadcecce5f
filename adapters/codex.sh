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
# codex flags (the sandbox, say: "--sandbox workspace-write") come from
# AGENT_BRIDGE_CODEX_ARGS, split on spaces; set it in the agent entry's
# "env".
#
# Usage: after "exec resume" codex reports the thread's running total;
# adapter-stream keeps each session's total in
# $CODEX_HOME/agent-bridge-usage (default ~/.codex) and books only what the
# run added.
#
# Retries: codex retries a failing model call up to 5 times. For a custom
# model provider (AGENT_BRIDGE_CODEX_PROVIDER, else config.toml's top-level
# model_provider) this adapter caps it at AGENT_BRIDGE_CODEX_MAX_RETRIES
# (default 2) with -c model_providers.<id>.request_max_retries and
# stream_max_retries; codex allows no such override of its built-in
# providers (openai, …), whose 5 quick retries take a few seconds. Each
# retry shows as progress ("retrying after 401 (attempt 2 of 3)"). It also
# turns off codex's unbounded_connection_retries feature, with which codex
# waits indefinitely while the model's address refuses connections.
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

codex_home=${CODEX_HOME:-${HOME:-}/.codex}
provider=${AGENT_BRIDGE_CODEX_PROVIDER:-}
if [ -z "$provider" ] && [ -f "$codex_home/config.toml" ]; then
	# The top-level key only: it ends at the first table.
	provider=$(awk '/^[[:space:]]*\[/ { exit } /^[[:space:]]*model_provider[[:space:]]*=/ { sub(/^[^=]*=[[:space:]]*/, ""); gsub(/["'"'"'[:space:]]/, ""); sub(/#.*/, ""); print; exit }' "$codex_home/config.toml" || true)
fi
retries=${AGENT_BRIDGE_CODEX_MAX_RETRIES:-2}

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
	# Without unbounded_connection_retries codex gives up on a model
	# address that refuses connections after its retries, instead of
	# waiting for the network for as long as the run may last.
	set -- exec --json --skip-git-repo-check --disable unbounded_connection_retries
	# A resumed session keeps the model it was started with.
	# "default" is the agent's own choice: no -m.
	if [ -n "$model" ] && [ "$model" != default ] && [ -z "$resume" ]; then
		set -- "$@" -m "$model"
	fi
	case "$provider" in
	"" | openai | oss | ollama | lmstudio) ;; # built in: codex refuses overrides
	*) set -- "$@" -c "model_providers.$provider.request_max_retries=$retries" -c "model_providers.$provider.stream_max_retries=$retries" ;;
	esac
	# shellcheck disable=SC2086 # word splitting of the extra flags is intended
	set -- "$@" ${AGENT_BRIDGE_CODEX_ARGS:-}
	if [ -n "$resume" ]; then
		set -- "$@" resume "$resume"
	fi
	{
		rc=0
		codex "$@" - <"$tmp/prompt.txt" || rc=$?
		echo "$rc" >"$tmp/codex.rc"
	} | "$bin" adapter-stream --session-totals "$codex_home/agent-bridge-usage" codex
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
