// Package mcpserver is agent-bridge's MCP server: it lets an interactive
// agent session (Claude Code, Codex, any MCP client) act in the bridge's
// threads as one participant, with tools to list, read and create threads,
// post, invite, read a thread's state and wait for a reply, and with each
// thread readable as a resource (bridge://threads/{id}).
//
// The server speaks to the bridge only through package client, exactly as
// the CLI does, so it needs no access to the bridge's database and works
// against any bridge the client can reach. A bridge refusal comes back to
// the model as a tool error carrying the bridge's own sentence, so the model
// can correct itself; only protocol-level failures are MCP errors.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
)

// Name is the implementation name the server reports to MCP clients.
const Name = "agent-bridge"

// Options configures a Server.
type Options struct {
	// Client talks to the bridge; required.
	Client *client.Client
	// As is the participant id every tool acts as (the "from" of posts,
	// invites and created threads); required, and must be a valid
	// participant id.
	As string
	// Version is reported to MCP clients; empty means "dev".
	Version string
	// Logger receives the server's own log lines; nil means
	// slog.Default(). On stdio it must not write to stdout, which is the
	// protocol stream.
	Logger *slog.Logger
	// Dir is the working folder, the only one post may attach files from
	// (attachments.go); "" is the process's working folder.
	Dir string
}

// Server is an MCP server acting as one participant of a bridge. It is
// safe for concurrent use: tool calls run concurrently and share nothing
// but the client, which is itself safe for concurrent use.
type Server struct {
	c   *client.Client
	as  string
	log *slog.Logger
	mcp *mcp.Server
	// dir is the working folder files are attached from (Options.Dir).
	dir string
	// calls is the parent of every request's context, and cancelCalls
	// ends them: the SDK detaches handlers from the session's context and
	// its Close waits for them, so a shutdown must cancel a long
	// wait_for_reply itself.
	calls       context.Context
	cancelCalls context.CancelFunc
}

// New returns a server with every tool, the thread resource template and
// the thread resource list registered.
func New(opts Options) (*Server, error) {
	if opts.Client == nil {
		return nil, errors.New("mcpserver: a bridge client is required")
	}
	if !agentbridge.ParticipantIDPattern.MatchString(opts.As) {
		return nil, fmt.Errorf("mcpserver: %q is not a valid participant id: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit", opts.As)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "mcp", "as", opts.As)
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	dir := opts.Dir
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("mcpserver: the working folder: %w", err)
		}
		dir = wd
	}
	s := &Server{c: opts.Client, as: opts.As, log: log, dir: dir}
	s.calls, s.cancelCalls = context.WithCancel(context.Background())
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: Name, Title: "agent-bridge", Version: version}, &mcp.ServerOptions{
		Instructions: instructions(opts.As),
		Logger:       log,
		// No "logging" capability: the server logs to stderr, not to the
		// client.
		Capabilities: &mcp.ServerCapabilities{},
	})
	s.mcp.AddReceivingMiddleware(s.endWithServer, friendlyArgErrors)
	s.addTools()
	s.addResources()
	return s, nil
}

// endWithServer ends a request's context when the server stops, as well as
// when the client cancels the request.
func (s *Server) endWithServer(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(s.calls, cancel)
		defer stop()
		return next(ctx, method, req)
	}
}

// instructions tell the model who it is on the bridge and how the tools fit
// together.
func instructions(as string) string {
	return fmt.Sprintf(`These tools connect you to agent-bridge, where people and agents talk in threads. You act as participant %q: everything you post or create is from %q.
Typical use: list_threads or create_thread; read_thread to catch up (each event shows its seq and id); post a message (to a participant id or "all", optionally reply_to an event id); then wait_for_reply with the id post returned to block until someone answers it.
Threads are also resources: bridge://threads/{id}.`, as, as)
}

// Run serves one session on t (a stdio transport for the CLI) until the
// client hangs up or ctx ends. When ctx ends, the tool calls in progress are
// cancelled and the session closed; the server is then done. A client
// hanging up and ctx ending are both normal ends and return nil.
//
// An *mcp.IOTransport is served through the line guard (stdio.go): a line
// that is not JSON gets a -32700 parse error and the session goes on,
// where the SDK alone would end it and lose the answers in flight.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	if io, ok := t.(*mcp.IOTransport); ok {
		t = &lineGuard{in: io.Reader, out: &lockedWriter{w: io.Writer}, log: s.log}
	}
	ss, err := s.mcp.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("mcp: connect: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
			return fmt.Errorf("mcp: session: %w", err)
		}
		return nil
	case <-ctx.Done():
		s.cancelCalls()
		_ = ss.Close()
		<-done
		return nil
	}
}

// toolError turns a failure into what the model sees: the bridge's own
// sentence and code for a refusal, a hint for a bridge that is not running,
// the error text otherwise.
func (s *Server) toolError(err error) error {
	var e *agentbridge.Error
	switch {
	case errors.As(err, &e):
		return fmt.Errorf("the bridge refused (%s): %s", e.Code, e.Message)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot reach the bridge at %s (is it running? start it with \"agent-bridge serve\"): %w", s.c.URL(), err)
	default:
		return err
	}
}

// invalidArg is a bad tool argument, caught before the bridge is asked.
func invalidArg(field, format string, args ...any) error {
	return fmt.Errorf("invalid %s: %s", field, fmt.Sprintf(format, args...))
}
