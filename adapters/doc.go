// Package adapters runs the programs that speak for agents. The coordinator
// hands each invocation to Run, which starts the configured command with no
// shell, writes the JSON Payload to its stdin and collects a bounded amount
// of output; the process group it runs in is killed on timeout or shutdown,
// so no adapter (or anything it spawned) outlives the coordinator. The
// adapter also gets a progress pipe as fd 3, whose JSON lines Run parses
// (ParseProgress, ReadProgress) and hands to Spec.Progress; ConvertStreamWith
// turns the claude and codex CLIs' event streams into such records and a
// reply, for "agent-bridge adapter-stream".
//
// The package also renders the prompt the shipped shell adapters feed to
// claude and codex (RenderPrompt), turns adapter output into a reply that
// fits the bridge (TruncateReply) and words failures for the thread
// (ErrorMessage). The wire protocol is described in docs/adapter-protocol.md.
package adapters
