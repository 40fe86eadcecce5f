package agentbridge

import (
	"strings"
	"testing"
)

func TestWriteStateText(t *testing.T) {
	t.Parallel()
	st := ThreadState{Paused: true, Muted: []string{"codex"}}
	st.Party = Party{On: true, MaxAgents: 2, Agents: []string{"a", "b"}}
	st.Participants.Invited = []Invite{{ID: "a", InvitedBy: "user", Profile: Profile{Client: "claude", Model: "m", Expertise: []string{"go", "sql"}}}}
	var b strings.Builder
	if err := WriteStateText(&b, "T1", 7, st); err != nil {
		t.Fatal(err)
	}
	want := "thread T1 at seq 7\n" +
		"paused:       on\n" +
		"muted:        codex\n" +
		"discussion:   off (agent mentions off)\n" +
		"invited_auto: off\n" +
		"party:        on (up to 2 of a, b, without reactions)\n" +
		"invited:\n" +
		"  a  client=claude  model=m  expertise=go,sql  (invited by user)\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
