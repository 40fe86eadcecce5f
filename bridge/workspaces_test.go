package bridge

import (
	"encoding/json"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestClaimNeedsTheWorkspace: a run whose thread picks a workspace is
// claimed only by a coordinator that registered it (409 no_workspace for
// another, which may still file a waiting claim); a workspace control
// naming a workspace no live coordinator has is answered ignored
// (unknown_workspace), one naming a registered workspace is not; the
// workspace and change controls are a person's (403 for a coordinator
// token).
func TestClaimNeedsTheWorkspace(t *testing.T) {
	ts := closedServer(t, Options{ClaimSweep: time.Hour})
	ts.newThread("t1")
	_, laptop := ts.mint(`{"scope":"coordinator","name":"laptop"}`)
	_, server := ts.mint(`{"scope":"coordinator","name":"server"}`)
	ts.as(laptop).registerTTL("laptop", "laptop.local", time.Minute, "claude")
	reg, _ := json.Marshal(map[string]any{"instance": "i-server", "host": "server.lan", "ttl_ms": 60000, "workspaces": []string{"app"},
		"agents": []map[string]string{{"name": "claude", "client": "claude", "kind": agentbridge.AgentKindAdapter}}})
	ts.as(server).must(200, "PUT", "/coordinators/server", string(reg))

	ctl := func(content string) answer {
		b, _ := json.Marshal(map[string]any{"type": "control", "from": "user", "content": json.RawMessage(content)})
		return ts.must(200, "POST", "/threads/t1/events", string(b))
	}
	ignoredCode := func(a answer) string {
		ig, _ := a.obj()["ignored"].(map[string]any)
		c, _ := ig["code"].(string)
		return c
	}
	if a := ctl(`{"workspace":{"name":"nope"}}`); ignoredCode(a) != agentbridge.IgnoredUnknownWorkspace {
		t.Errorf("a workspace nobody has: %s, want ignored unknown_workspace", a.body)
	}
	if a := ctl(`{"workspace":{"name":"app"}}`); ignoredCode(a) != "" {
		t.Errorf("a registered workspace: %s, want no ignored note", a.body)
	}
	b, _ := json.Marshal(map[string]any{"type": "control", "from": "laptop", "content": json.RawMessage(`{"change":{"merge":{"participant":"claude"}}}`)})
	if a := ts.as(laptop).do("POST", "/threads/t1/events", string(b)); a.status != 403 || a.errCode() != agentbridge.ECodeForbiddenSender {
		t.Errorf("a coordinator's change control: %d %s, want 403 forbidden_sender", a.status, a.body)
	}

	ts.invite("t1", "claude")
	trigger := ts.post("t1", "user", "@claude hello")
	if a := ts.as(laptop).do("POST", "/claims", claimBody("laptop", trigger.ID, "claude", `"client":"claude"`)); a.status != 409 || a.errCode() != agentbridge.ECodeNoWorkspace {
		t.Fatalf("a claim without the workspace: %d %s, want 409 no_workspace", a.status, a.body)
	}
	if a := ts.as(laptop).do("POST", "/claims", claimBody("laptop", trigger.ID, "claude", `"client":"claude"`, `"wait":true`)); a.status != 200 {
		t.Errorf("a waiting claim without the workspace: %d %s, want 200", a.status, a.body)
	}
	got := claimAnswer(t, ts.as(server).must(200, "POST", "/claims", claimBody("server", trigger.ID, "claude", `"client":"claude"`)))
	if !got.Granted {
		t.Errorf("the claim of the coordinator that has the workspace: %+v", got)
	}
}
