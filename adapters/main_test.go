package adapters_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
)

// fakePath is the fake adapter binary, built once for the package's tests.
var fakePath string

func TestMain(m *testing.M) {
	if os.Getenv(parentHelperEnv) != "" {
		runParentHelper()
		return
	}
	os.Exit(runMain(m))
}

// parentHelperEnv makes the test binary act as a coordinator that runs one
// adapter (the fake at the path in the variable) and is then killed by the
// test.
const parentHelperEnv = "ADAPTERS_TEST_PARENT_FAKE"

func runParentHelper() {
	payload := []byte(`{"event_id":"ev1","content":"fake:child","participant":{"id":"p"}}`)
	spec := adapters.Spec{Command: []string{os.Getenv(parentHelperEnv)}}
	adapters.Run(context.Background(), spec, payload, nil)
	os.Exit(0)
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "fakeadapter-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fakePath, err = stack.NewPrograms(dir).Path(ctx, stack.FakeAdapter)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
