package agentbridge

import _ "embed"

// The primers ship inside the binary too, so that a coordinator started
// away from the repository (its config's primer_path naming a file that is
// not there) still tells agents how the bridge works.
var (
	//go:embed docs/bridge-agent-primer.md
	bridgePrimer string
	//go:embed docs/scene-actor-primer.md
	scenePrimer string
)

// BuiltinPrimer is docs/bridge-agent-primer.md as built into the binary.
func BuiltinPrimer() string { return bridgePrimer }

// BuiltinScenePrimer is docs/scene-actor-primer.md as built into the
// binary.
func BuiltinScenePrimer() string { return scenePrimer }
