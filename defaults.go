package agentbridge

// The one place for the defaults every part shares: the bridge's and the
// coordinator status API's addresses, the database's path, and the names of
// the environment variables that override them. Commands, the coordinator,
// the UI and the adapters' environment all take them from here, so that a
// changed port or name cannot leave one of them behind.
const (
	// DefaultBridgeAddr is where the bridge listens: loopback only.
	DefaultBridgeAddr = "127.0.0.1:5111"
	// DefaultBridgeURL is the bridge as its clients reach it.
	DefaultBridgeURL = "http://" + DefaultBridgeAddr
	// DefaultStatusAddr is where the coordinator's status API listens.
	DefaultStatusAddr = "127.0.0.1:5112"
	// DefaultStatusURL is the status API as commands and the UI reach it.
	DefaultStatusURL = "http://" + DefaultStatusAddr
	// DefaultDBPath is the bridge's SQLite file, relative to the working
	// directory.
	DefaultDBPath = "./data/bridge.db"
	// DefaultCoordinatorConfig is the coordinator's config file.
	DefaultCoordinatorConfig = "./coordinator.config.json"
	// DefaultCoordinatorState is the coordinator's state database.
	DefaultCoordinatorState = "./data/coordinator.db"

	// EnvBridgeURL names the bridge's URL for clients and adapters.
	EnvBridgeURL = "BRIDGE_URL"
	// EnvToken holds the bridge's token (a file given with --token-file
	// wins).
	EnvToken = "BRIDGE_TOKEN"
	// EnvDB names the bridge's database: a file path or a postgres:// URL.
	EnvDB = "BRIDGE_DB"
	// EnvCoordinatorURL names the coordinator's status API.
	EnvCoordinatorURL = "BRIDGE_COORDINATOR_URL"
	// EnvCoordinatorConfig names the coordinator's config file.
	EnvCoordinatorConfig = "BRIDGE_COORDINATOR_CONFIG"
	// EnvCoordinatorState names the coordinator's state database.
	EnvCoordinatorState = "BRIDGE_COORDINATOR_STATE"
	// EnvAddr names the bridge's listen address.
	EnvAddr = "BRIDGE_ADDR"
	// EnvLogLevel names the log level of every daemon.
	EnvLogLevel = "BRIDGE_LOG_LEVEL"
)
