// Package wakebench measures the coordinator's wake latency from outside,
// as a user sees it: `agent-bridge serve` and `agent-bridge coordinator` run
// as two processes, a compiled no-op adapter answers, and each trigger is
// timed from its POST to its reply on the thread's SSE stream, beside the
// floor measured in the same run (one fork/exec of that adapter plus two
// loopback round trips). The in-process benchmark in coordinator/ shares a
// process and a scheduler with the bridge, so it does not see this path.
//
// The package holds its benchmarks (wake_test.go; hundred_test.go, 100
// triggers at once through the same two processes; claims_test.go, the
// wake with two coordinator processes, each run claimed at the bridge),
// the processes they start (daemons_test.go; $WAKEBENCH_BIN runs a
// prebuilt agent-bridge, an older commit's, instead of the tree's) and
// Floor, which the in-process benchmark in coordinator/ reports too.
package wakebench
