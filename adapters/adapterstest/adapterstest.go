// Package adapterstest gives other packages' tests the fake adapter, a real
// program steered by "fake:" directives in the message content (see
// adapters/internal/fakeadapter).
package adapterstest

import (
	"context"
	"fmt"

	"github.com/agent-bridge/agent-bridge/internal/testutil"
)

// BuildFake builds the fake adapter into dir and returns its path. Call it
// once per test binary (in TestMain) and share the path: a build takes
// seconds. The fake is never built with -race: a race-enabled program
// sleeps a second at every clean exit (GORACE atexit_sleep_ms), which would
// slow every invocation, and the fake is too simple to need it.
func BuildFake(ctx context.Context, dir string) (string, error) {
	path, err := testutil.GoBuild(ctx, "./adapters/internal/fakeadapter", dir, false)
	if err != nil {
		return "", fmt.Errorf("build fake adapter: %w", err)
	}
	return path, nil
}
