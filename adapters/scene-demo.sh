#!/bin/sh
# scene-demo.sh: a scripted actor for trying scene mode without any AI CLI
# (docs/scenes.md). It answers in the tag format every actor uses, reading
# the payload with "agent-bridge prompt --field" (no jq, no python): a few
# fixed lines by turn number, one of them a closing line, so that a demo
# scene between two scene-demo actors closes on its own after five turns.
set -eu

bin=${AGENT_BRIDGE_BIN:-agent-bridge}
if ! command -v "$bin" >/dev/null 2>&1; then
	echo "scene-demo.sh: cannot find the agent-bridge binary ($bin): set AGENT_BRIDGE_BIN or put agent-bridge on PATH" >&2
	exit 127
fi
payload=$(cat)
field() { printf '%s' "$payload" | "$bin" prompt --field "$1"; }

actor=$(field scene.actor)
if [ -z "$actor" ]; then
	echo "scene-demo.sh: this payload has no scene briefing; invite me as an actor and start a scene" >&2
	exit 64
fi
other=$(field scene.with.0)

if [ "$(field scene.step)" = journal ]; then
	printf 'Dear journal: today %s and I finally talked. I expected it to be harder. ' "$other"
	printf 'I keep thinking about the tea going cold while neither of us said the real thing.\n'
	exit 0
fi

case $(field scene.turn) in
1) line="*[opens the door]* Oh. You came. Come in, the kettle is on." ;;
2) line="Thanks. I nearly turned back at the corner." ;;
3) line="I'm glad you didn't. *[pours tea]* So. What did you want to say?" ;;
4) line="Only that I'm sorry. That's all it was. I should head out before I say it worse." ;;
5) line="*[walks with $other to the door]* Come back soon. Really." ;;
*) line="*[nods]*" ;;
esac

printf '<thinking>\n%s weighs what %s just said and what is left unsaid.\n</thinking>\n' "$actor" "$other"
printf '<speech>\n%s\n</speech>\n' "$line"
