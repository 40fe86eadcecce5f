#!/bin/sh
# echo.sh: an adapter that replies with the message it was sent, to check the
# coordinator loop end to end without a real agent.
#
# It reads the payload (JSON) on stdin and prints its "content" field with
# "agent-bridge prompt --field content", so it needs neither jq nor python:
# the binary is $AGENT_BRIDGE_BIN (the coordinator sets it to itself) or
# agent-bridge on PATH.
set -eu

bin=${AGENT_BRIDGE_BIN:-agent-bridge}
if ! command -v "$bin" >/dev/null 2>&1; then
	echo "echo.sh: cannot find the agent-bridge binary ($bin): set AGENT_BRIDGE_BIN or put agent-bridge on PATH" >&2
	exit 127
fi
exec "$bin" prompt --field content
