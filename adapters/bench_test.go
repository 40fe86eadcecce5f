package adapters_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
)

// BenchmarkRun measures the runner's cost per invocation of a trivial
// adapter (start, payload, wait, group kill): the floor under every reply.
func BenchmarkRun(b *testing.B) {
	_, payload := testPayload(b, "hello")
	spec := adapters.Spec{Command: []string{fakePath}}
	for b.Loop() {
		if res := adapters.Run(context.Background(), spec, payload, nil); !res.OK() {
			b.Fatal(adapters.ErrorMessage(res, 0))
		}
	}
}

// BenchmarkRunBigStdout measures draining 10 MiB of runaway output through
// the 4 MiB cap.
func BenchmarkRunBigStdout(b *testing.B) {
	_, payload := testPayload(b, "fake:big="+strconv.Itoa(10<<20))
	spec := adapters.Spec{Command: []string{fakePath}}
	b.SetBytes(10 << 20)
	for b.Loop() {
		if res := adapters.Run(context.Background(), spec, payload, nil); !res.OK() || !res.StdoutTruncated {
			b.Fatal(adapters.ErrorMessage(res, 0))
		}
	}
}

// BenchmarkRenderPrompt renders a default-sized context window (25
// messages of 1 KiB).
func BenchmarkRenderPrompt(b *testing.B) {
	events := make([]agentbridge.Event, 25)
	for i := range events {
		c, _ := json.Marshal(strings.Repeat("word ", 200))
		events[i] = agentbridge.Event{ID: strconv.Itoa(i), Type: agentbridge.TypeMessage, From: "user", To: "all", Content: c}
	}
	p := adapters.NewPayload("u", agentbridge.Thread{ID: "t", Name: "n"}, events[24], "codex", agentbridge.Profile{}, events, strings.Repeat("primer ", 100))
	for b.Loop() {
		_ = adapters.RenderPrompt(p)
	}
}
