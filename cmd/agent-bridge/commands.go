package main

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/service"
)

// runFunc runs a command with its positional arguments, after its flags
// were parsed.
type runFunc func(ctx context.Context, pos []string) error

// command is one row of the command table: what help shows, and define,
// which declares the command's flags on c and returns what runs it.
type command struct {
	use     string
	aliases []string
	group   string
	short   string
	long    string
	example string
	define  func(c *cobra.Command) runFunc
	sub     []command
	hidden  bool
}

// Help groups of the top-level commands.
const (
	groupDaemons = "daemons"
	groupClient  = "client"
	groupRuns    = "runs"
	groupAgents  = "agents"
	groupOps     = "ops"
)

// commandTable is every command of agent-bridge. Help, completion and
// docs/cli.md's reference (TestCLIReference) are made from it.
func (m *Main) commandTable() []command {
	controls := []command{
		{use: "uninvite THREAD ID", short: "remove a participant from a thread"},
		{use: "mute THREAD ID...", short: "mute participants: hard (the bridge refuses their messages) or soft (never invoked)"},
		{use: "unmute THREAD ID...", short: "unmute participants"},
		{use: "prod THREAD ID...", short: "invoke participants once on the thread as it stands"},
		{use: "pause THREAD on|off", short: "pause a thread: only humans may post while it is paused"},
		{use: "discussion THREAD on|off", short: "discussion mode: agents answer each other's mentions"},
		{use: "auto THREAD on|off", short: "invited_auto: a human's message wakes every invited agent"},
	}
	for i := range controls {
		name, _, _ := strings.Cut(controls[i].use, " ")
		controls[i].group = groupClient
		controls[i].define = m.controlCommand(name)
	}
	cmds := []command{
		{use: "serve", group: groupDaemons, short: "the bridge server (HTTP API, streams, web UI)",
			define: m.daemonCommand(service.Serve, m.serveCommand)},
		{use: "coordinator", group: groupDaemons, short: "the coordinator daemon (trigger rules, adapters)",
			define: m.daemonCommand(service.Coordinator, m.coordinatorCommand)},
		{use: "up", group: groupDaemons, short: "the bridge and the coordinator in one process, for a first run",
			long: "up runs the bridge (--addr, default " + agentbridge.DefaultBridgeURL + ") and the coordinator, whose status API\n" +
				"listens on a second port (--status-addr, default " + agentbridge.DefaultStatusURL + "). It writes both addresses\n" +
				"to a runtime file, so that other agent-bridge commands find it without BRIDGE_URL, and prints\n" +
				"the export lines when an address is not the default.",
			example: "  agent-bridge up\n  agent-bridge up --addr 127.0.0.1:18301 --status-addr 127.0.0.1:18302 --config agents.json",
			define:  m.upCommand},
		{use: "thread", group: groupClient, short: "create, list and rename threads", sub: []command{
			{use: "new NAME...", short: "create a thread; prints its id", define: m.threadNewCommand},
			{use: "list", aliases: []string{"ls"}, short: "list threads, most recently updated first", define: m.threadListCommand},
			{use: "rename THREAD NAME...", short: "rename a thread (posts thread.renamed)", define: m.threadRenameCommand},
		}},
		{use: "post THREAD TEXT...", group: groupClient, short: `post a message ("-" as TEXT reads standard input)`,
			example: "  agent-bridge post plan \"hello @codex\"\n  git diff | agent-bridge post plan - --from ci\n  agent-bridge post plan '{\"pause\":{\"on\":true}}' --type control\n  agent-bridge post plan \"see this\" --attach shot.png --attach app.log",
			define:  m.postCommand},
		{use: "get ID", group: groupClient, short: "download an attachment (-o FILE; default its name, in this folder), checked against its id",
			example: "  agent-bridge get sha256:9f86d08…\n  agent-bridge get sha256:9f86d08… -o shot.png\n  agent-bridge get sha256:9f86d08… -o - | less",
			define:  m.getCommand},
		{use: "invite THREAD ID", group: groupClient, short: "invite a participant into a thread", define: m.inviteCommand},
	}
	cmds = append(cmds, controls...)
	cmds = append(cmds,
		command{use: "party THREAD on|off", group: groupClient, short: "party mode: a few agents answer each message, then react to each other", define: m.partyCommand},
		command{use: "scene THREAD on|off", group: groupClient, short: "start or close a scene between actors",
			example: "  agent-bridge scene T on --actors maria,sam --setting \"a café\" --brief maria=\"you are late\"\n  agent-bridge scene T off",
			define:  m.sceneCommand},
		command{use: "state THREAD", group: groupClient, short: "a thread's derived state (paused, muted, invited, modes)", define: m.stateCommand},
		command{use: "search QUERY...", group: groupClient, short: "search every thread: words, \"phrases\", prefixes such as decid* (newest first)",
			example: "  agent-bridge search deploy friday\n  agent-bridge search '\"ship the parser\"' --thread plan --from user\n  agent-bridge search 'decid*' --limit 50",
			define:  m.searchCommand},
		command{use: "schedules [THREAD]", group: groupClient, short: "the schedules (of one thread) with their next due time", define: m.schedulesCommand},
		command{use: "tail [THREAD]", group: groupClient, short: "follow a thread (or every thread with --all) as it is written",
			long:   "tail prints a thread's last events (--last) or those after --after, with their receipts,\nthen follows the thread; it reconnects when the bridge restarts and stops on Ctrl-C.",
			define: m.tailCommand},
		command{use: "transcript THREAD", group: groupClient, short: "a thread's transcript: its latest scene, or its messages", define: m.transcriptCommand},
		command{use: "cancel THREAD ID", group: groupRuns, short: "stop a participant's queued and running invocations (posts the cancel control)", define: m.cancelCommand},
		command{use: "changes THREAD", group: groupRuns, short: "each participant's branch in the thread's workspaces: its commits and +/− (docs/workspaces.md)", define: m.changesCommand},
		command{use: "diff THREAD PARTICIPANT", group: groupRuns, short: "a participant's changes in the thread as unified diffs, oldest first", define: m.diffCommand},
		command{use: "merge THREAD PARTICIPANT", group: groupRuns, short: "merge a participant's branch into the workspace's repository (--into, --squash) and print the coordinator's answer",
			example: "  agent-bridge merge T claude\n  agent-bridge merge T codex --into release --squash", define: m.mergeCommand},
		command{use: "discard THREAD PARTICIPANT", group: groupRuns, short: "remove a participant's branch and worktree unmerged, and print the coordinator's answer", define: m.discardCommand},
		command{use: "permit THREAD EVENT OPTION", group: groupRuns, short: "answer an ACP agent's permission request with one of the options it lists (docs/acp.md)",
			long: "permit posts the answer and prints its id. An answer that counts for nothing exits 1 after the\n" +
				"bridge's sentence on stderr: the request was already answered (\"already answered by user at …\",\n" +
				"from another device, say: the first answer is the one acted on), or --from is not a human.",
			define: m.permitCommand},
		command{use: "answer THREAD EVENT [FIELD=VALUE...]", group: groupRuns, short: "answer an ACP agent's question with fields, or decline it (docs/acp.md)",
			long: "answer posts the answer and prints its id. Each FIELD=VALUE is read as its field's type (a whole\n" +
				"number, a number, true or false, text); a multiple choice takes one FIELD=VALUE per choice. A value\n" +
				"that does not fit is refused with the bridge's sentence naming the field. An answer that counts for\n" +
				"nothing (already answered, or --from is not a human) exits 1, as permit does.",
			example: "  agent-bridge answer plan 12 branch=main size=m\n  agent-bridge answer plan 12 --decline",
			define:  m.answerCommand},
		command{use: "invocations", group: groupRuns, short: "the coordinator's invocation records", define: m.invocationsCommand, sub: []command{
			{use: "show ID", short: "one invocation and its progress", define: m.invocationShowCommand},
			{use: "cancel ID", short: "stop one invocation through the coordinator's status API", define: m.invocationCancelCommand},
		}},
		command{use: "why EVENT_ID | THREAD SEQ", group: groupRuns, short: "the coordinator's routing decision for one event (its id, or its thread and seq as tail prints them)", define: m.whyCommand},
		command{use: "sessions", group: groupRuns, short: "the CLI sessions the coordinator keeps per participant", define: m.sessionsCommand, sub: []command{
			{use: "reset THREAD ID", short: "start a new CLI session on the participant's next turn", define: m.sessionsResetCommand},
		}},
		command{use: "journal ID", group: groupRuns, short: "an actor's journal, kept by the coordinator", define: m.journalCommand},
		command{use: "agents", group: groupAgents, short: "the agents the coordinator config defines, and the live coordinators the bridge knows with the agents each serves", define: m.agentsCommand},
		command{use: "prompt", group: groupAgents, short: "render an adapter payload (stdin) as a prompt, or print one of its fields", define: m.promptCommand},
		command{use: "adapter", group: groupAgents, short: "the adapters built into agent-bridge", sub: []command{
			{use: "echo", short: "the echo agent: prints the payload's content (payload on stdin)", define: m.adapterEchoCommand},
			{use: "stream claude|codex", short: "a CLI's JSON events (stdin) to the reply (stdout) and progress records (fd 3)", define: m.adapterStreamCommand},
		}},
		command{use: "adapter-stream claude|codex", group: groupAgents, short: "adapter stream under its first name, which the shipped scripts use", define: m.adapterStreamCommand},
		command{use: "mcp", group: groupAgents, short: "an MCP server on stdio acting as participant --as (docs/mcp.md)", define: m.mcpCommand},
		command{use: "service install|uninstall|start|stop|status serve|coordinator [-- DAEMON FLAGS]", group: groupOps,
			short: "run serve or the coordinator under launchd or systemd", long: serviceLong,
			example: "  agent-bridge service install serve -- --addr 127.0.0.1:5111 --token-file ~/.config/agent-bridge/token\n  agent-bridge service install coordinator -- --config ./coordinator.config.json",
			define:  m.serviceCommand},
		command{use: "tokens", group: groupOps, short: "the bridge's tokens: add, list, revoke (docs/security.md)", sub: []command{
			{use: "add", short: "make a token (--scope person|coordinator|agent|read, --name); prints its secret once",
				example: "  agent-bridge tokens add --scope read --name dashboard\n  agent-bridge tokens add --scope agent --name run-1 --thread T --participant claude --ttl 1h\n  agent-bridge tokens add --scope coordinator --name laptop --agents claude,codex",
				define:  m.tokensAddCommand},
			{use: "list", aliases: []string{"ls"}, short: "the valid tokens, never their secrets (--all: the revoked and expired too)", define: m.tokensListCommand},
			{use: "revoke ID|NAME", short: "revoke a token by id, or every valid token of that name", define: m.tokensRevokeCommand},
		}},
		command{use: "login-link", group: groupOps, short: "a link that opens the web UI logged in, once, within 10 minutes (as up prints it)", define: m.loginLinkCommand},
		command{use: "whoami", group: groupOps, short: "who this CLI's token is: the participant it writes as, its name and scope", define: m.whoamiCommand},
		command{use: "pair", group: groupOps, short: "a one-time link (and its QR code) that logs a phone in with its own token, for 10 minutes",
			example: "  agent-bridge pair --name phone", define: m.pairCommand},
		command{use: "devices", group: groupOps, short: "the paired devices: last seen, notifications, last push (--deliveries: each one's pushes)",
			example: "  agent-bridge devices --deliveries", define: m.devicesCommand, sub: []command{
				{use: "revoke ID", short: "end a paired device's access and its notifications", define: m.devicesRevokeCommand},
			}},
		command{use: "backup", group: groupOps, short: "copy the bridge database to a file (the server may be running)", define: m.backupCommand},
		command{use: "restore", group: groupOps, short: "replace the bridge database with a backup (the server must be stopped)", define: m.restoreCommand},
		command{use: "doctor", group: groupOps, short: "check the setup: config, agents and their CLIs, bridge, databases, services", define: m.doctorCommand},
		command{use: "version", group: groupOps, short: "the module version, VCS revision and Go version of this binary", define: m.versionCommand},
	)
	return cmds
}

// serviceLong is service's help text.
const serviceLong = `install writes the service definition (replacing a previous one) and starts it.
Flags after "--" are passed to the daemon; relative file paths among them
(--db, --state, --config, --token-file) are made absolute.`

// envHelp describes each environment variable a flag may default to.
var envHelp = map[string]string{
	agentbridge.EnvBridgeURL:         "the bridge URL (else the running up's, else " + agentbridge.DefaultBridgeURL + ")",
	agentbridge.EnvCoordinatorURL:    "the coordinator's status API (else the running up's, else " + agentbridge.DefaultStatusURL + ")",
	agentbridge.EnvToken:             "the bearer token, when no --token-file is given",
	agentbridge.EnvAddr:              "the bridge's listen address",
	agentbridge.EnvDB:                "the bridge database",
	agentbridge.EnvCoordinatorConfig: "the coordinator config file",
	agentbridge.EnvCoordinatorState:  "the coordinator state database",
	agentbridge.EnvLogLevel:          "the log level",
}

// envAnnotation is the flag annotation naming the environment variable a
// flag defaults to; help lists them under "Environment".
const envAnnotation = "env"

// envInUsage finds the environment variable a flag's usage names.
var envInUsage = regexp.MustCompile(`env (BRIDGE_[A-Z_]+)`)

// envFlag marks flag name of fs as defaulting to the environment
// variable key.
func envFlag(fs *pflag.FlagSet, name, key string) {
	_ = fs.SetAnnotation(name, envAnnotation, []string{key})
}

// usageTemplate is cobra's usage text with an "Environment" section.
const usageTemplate = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}{{$cmds := .Commands}}{{if eq (len .Groups) 0}}

Commands:{{range $cmds}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{else}}{{range $group := .Groups}}

{{.Title}}{{range $cmds}}{{if (and (eq .GroupID $group.ID) (or .IsAvailableCommand (eq .Name "help")))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if not .AllChildCommandsHaveGroup}}

Other commands:{{range $cmds}}{{if (and (eq .GroupID "") (or .IsAvailableCommand (eq .Name "help")))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{with index .Annotations "env"}}

Environment:
{{.}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

// rootCommand builds the cobra command tree from the table.
func (m *Main) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "agent-bridge",
		Short: "a local substrate for multi-agent conversation",
		Long: "agent-bridge: a local substrate for multi-agent conversation.\n\n" +
			"Start with \"agent-bridge up\", then \"agent-bridge thread new NAME\" and \"agent-bridge post THREAD TEXT\".\n" +
			"Commands find a running up by themselves (flag, then BRIDGE_URL / BRIDGE_COORDINATOR_URL, then up's\n" +
			"runtime file, then the defaults). Most client commands take --json: one JSON value per line.",
		Version:       versionString(),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			return unknownCommand(c, args[0])
		},
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprint(c.ErrOrStderr(), c.UsageString())
			return usagef("no command given")
		},
	}
	root.SuggestionsMinimumDistance = 2
	root.SetOut(m.rawOut())
	root.SetErr(m.Stderr)
	root.SetIn(m.Stdin)
	root.SetUsageTemplate(usageTemplate)
	root.SetVersionTemplate("agent-bridge {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%s: %v (see \"%s --help\")", strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" "), err, c.CommandPath())
	})
	root.AddGroup(
		&cobra.Group{ID: groupDaemons, Title: "Daemons:"},
		&cobra.Group{ID: groupClient, Title: "Threads and messages:"},
		&cobra.Group{ID: groupRuns, Title: "Runs:"},
		&cobra.Group{ID: groupAgents, Title: "Agents and adapters:"},
		&cobra.Group{ID: groupOps, Title: "Operations:"},
	)
	root.SetHelpCommandGroupID(groupOps)
	root.SetCompletionCommandGroupID(groupOps)
	for _, spec := range m.commandTable() {
		root.AddCommand(m.build(spec))
	}
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	// "agent-bridge help" lists every environment variable a command reads.
	var env []string
	for _, key := range slices.Sorted(maps.Keys(envHelp)) {
		env = append(env, envLine(key))
	}
	root.Annotations = map[string]string{envAnnotation: strings.Join(env, "\n")}
	return root
}

// envLine is an environment variable's line in help.
func envLine(key string) string { return fmt.Sprintf("  %-26s %s", key, envHelp[key]) }

// build makes one cobra command (and its subcommands) from the table.
func (m *Main) build(spec command) *cobra.Command {
	c := &cobra.Command{
		Use:     spec.use,
		Aliases: spec.aliases,
		GroupID: spec.group,
		Short:   spec.short,
		Long:    spec.long,
		Example: spec.example,
		Hidden:  spec.hidden,
	}
	if c.Long == "" {
		c.Long = strings.ToUpper(spec.short[:1]) + spec.short[1:] + "."
	}
	for _, s := range spec.sub {
		c.AddCommand(m.build(s))
	}
	switch {
	case spec.define != nil:
		run := spec.define(c)
		thread := takesThread(spec.use)
		c.RunE = func(c *cobra.Command, args []string) error {
			if thread && len(args) > 0 {
				// A thread's name is taken where its id is (resolve.go).
				id, err := m.threadArg(c, args[0])
				if err != nil {
					return err
				}
				args = append([]string{id}, args[1:]...)
			}
			return run(c.Context(), args)
		}
	case len(spec.sub) > 0:
		c.RunE = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("%s: give a subcommand: %s", c.Name(), subcommandNames(c))
			}
			return unknownCommand(c, args[0])
		}
	}
	if takesThread(spec.use) {
		c.ValidArgsFunction = m.completeThread
	}
	c.Flags().SortFlags = false
	c.SuggestionsMinimumDistance = 2
	var env []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if sm := envInUsage.FindStringSubmatch(f.Usage); sm != nil && len(f.Annotations[envAnnotation]) == 0 {
			envFlag(c.Flags(), f.Name, sm[1])
		}
		for _, key := range f.Annotations[envAnnotation] {
			if !slices.ContainsFunc(env, func(s string) bool { return strings.HasPrefix(s, "  "+key+" ") }) {
				env = append(env, envLine(key))
			}
		}
	})
	if len(env) > 0 {
		c.Annotations = map[string]string{envAnnotation: strings.Join(env, "\n")}
	}
	return c
}

// completeThread completes a THREAD argument with the ids of the bridge's
// threads, most recently updated first, found as the command itself would
// find the bridge (its --url and --token-file when given on the line).
func (m *Main) completeThread(c *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 || c.Flags().Lookup("url") == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cf := &clientFlags{fs: c.Flags()}
	cf.url, _ = c.Flags().GetString("url")
	cf.tokenFile, _ = c.Flags().GetString("token-file")
	cl, err := m.newClient(cf)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	parent := c.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, 2*time.Second)
	defer cancel()
	threads, err := cl.Threads(ctx, "", 200)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	out := make([]cobra.Completion, 0, len(threads))
	for _, th := range threads {
		out = append(out, cobra.CompletionWithDesc(th.ID, th.Name))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// subcommandNames lists c's subcommands as "new, list or rename".
func subcommandNames(c *cobra.Command) string {
	var names []string
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// unknownCommand is the usage error for a command name c does not have,
// with the nearest names when there are some.
func unknownCommand(c *cobra.Command, name string) error {
	what := "command"
	if c.HasParent() {
		what = "subcommand"
	}
	msg := fmt.Sprintf("unknown %s %q for %q", what, name, c.CommandPath())
	if s := c.SuggestionsFor(name); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	} else if c.HasParent() {
		msg += " (want " + subcommandNames(c) + ")"
	}
	return usagef("%s (see \"%s --help\")", msg, c.CommandPath())
}

// goStyleFlag is a single-dash long flag, as Go's flag package accepted
// them ("-addr x", "-json", "-limit=5").
var goStyleFlag = regexp.MustCompile(`^-([a-z][a-z0-9-]+)(=.*)?$`)

// goStyleFlags rewrites "-name" to "--name" where name is a long flag of
// the command args select, so that scripts and service definitions
// written for the Go-flag CLI keep working: pflag would read "-addr" as
// the shorthands -a -d -d -r. Arguments after "--" and words that are no
// flag of the command are left alone.
func goStyleFlags(root *cobra.Command, args []string) []string {
	cmd, _, _ := root.Find(args)
	if cmd == nil {
		cmd = root
	}
	cmd.InitDefaultHelpFlag()
	cmd.InitDefaultVersionFlag()
	out := slices.Clone(args)
	for i, a := range out {
		if a == "--" {
			break
		}
		sm := goStyleFlag.FindStringSubmatch(a)
		if sm == nil {
			continue
		}
		if cmd.Flags().Lookup(sm[1]) != nil || cmd.InheritedFlags().Lookup(sm[1]) != nil {
			out[i] = "-" + a
		}
	}
	return out
}

// versionString is what version prints: the -ldflags version when set,
// else the module version from the build info, with the VCS revision and
// the Go version.
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if version != "" {
			return version
		}
		return "(no build info)"
	}
	v := version
	if v == "" {
		v = bi.Main.Version
	}
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev == "" {
		rev = "unknown"
	} else if len(rev) > 12 {
		rev = rev[:12]
	}
	return fmt.Sprintf("%s (revision %s%s, %s)", v, rev, modified, bi.GoVersion)
}

// versionCommand is "agent-bridge version".
func (m *Main) versionCommand(c *cobra.Command) runFunc {
	return func(_ context.Context, pos []string) error {
		if len(pos) > 0 {
			return usagef("version takes no arguments, got %q", pos[0])
		}
		_, err := fmt.Fprintf(m.Stdout, "agent-bridge %s\n", versionString())
		return err
	}
}

// daemonCommand runs a daemon's command through service.Run, so that under
// launchd or systemd kardianos's Start/Stop drive the same graceful
// shutdown as a signal does.
func (m *Main) daemonCommand(d service.Daemon, define func(c *cobra.Command) runFunc) func(c *cobra.Command) runFunc {
	return func(c *cobra.Command) runFunc {
		run := define(c)
		return func(ctx context.Context, pos []string) error {
			return service.Run(ctx, d, func(ctx context.Context) error { return run(ctx, pos) })
		}
	}
}

// moduleVersion is the short version the bridge reports on /ping: the
// -ldflags version, else the module version from the build info.
func moduleVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
