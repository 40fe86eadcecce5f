package registry

import (
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

func TestLiveDuplicate(t *testing.T) {
	t.Parallel()
	reg := func(instance string, age, ttl int64, live bool) agentbridge.CoordinatorInfo {
		return agentbridge.CoordinatorInfo{Registration: agentbridge.Registration{ID: "laptop", Instance: instance, TTLMillis: ttl}, AgeMillis: age, Live: live}
	}
	for _, tc := range []struct {
		name  string
		other agentbridge.CoordinatorInfo
		want  bool
	}{
		{"another process, just renewed", reg("b", 100, 30000, true), true},
		{"another process, a third of the ttl old", reg("b", 10000, 30000, true), true},
		{"missed a heartbeat: gone, not a duplicate", reg("b", 16000, 30000, true), false},
		{"lapsed", reg("b", 31000, 30000, false), false},
		{"this process", reg("a", 100, 30000, true), false},
	} {
		if got := liveDuplicate(tc.other, "a"); got != tc.want {
			t.Errorf("%s: liveDuplicate = %v, want %v", tc.name, got, tc.want)
		}
	}
}
