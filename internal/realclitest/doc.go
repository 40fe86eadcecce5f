// Package realclitest runs the shipped claude and codex adapters with the
// real, pinned agent CLIs (npm @anthropic-ai/claude-code and @openai/codex,
// versions in .ci/clis/package.json) through a real "agent-bridge serve"
// and "agent-bridge coordinator", against the project's fake model server
// (internal/testkit/fakemodel). Nothing reaches the internet.
//
// The tests find the CLIs in the folder named by AGENT_BRIDGE_CLI_BIN (what
// .ci/install-clis prints); without it they skip with the reason, except
// under CI=true, where they fail. The package holds only tests; see
// docs/adapter-protocol.md, "Tested against the real CLIs".
package realclitest
