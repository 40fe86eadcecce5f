package adapters

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Defaults applied by Run to zero fields of Spec.
const (
	// DefaultKillGrace is how long an adapter has between SIGTERM and
	// SIGKILL: enough for a CLI to flush and exit, short enough that a
	// stuck one does not hold a shutdown for long.
	DefaultKillGrace = 5 * time.Second
	// DefaultMaxStdout caps the stdout kept in memory; replies are far
	// smaller (max_reply_chars), so more would only be a runaway adapter.
	DefaultMaxStdout = 4 << 20
	// DefaultMaxStderr is the size of the stderr tail kept for error
	// messages: the last lines are the ones that say what went wrong.
	DefaultMaxStderr = 8 << 10
)

// drainTimeout bounds the wait for the output pipes to reach EOF once the
// adapter's process group is gone. Only a process that left the group
// (setsid) can still hold them; its output is not waited for.
const drainTimeout = 2 * time.Second

// Spec describes one adapter invocation. The zero values of KillGrace,
// MaxStdout and MaxStderr mean the defaults above.
type Spec struct {
	// Command is argv; it is run directly, never through a shell.
	Command []string
	// Dir is the working directory ("" inherits the coordinator's).
	Dir string
	// Env holds KEY=VALUE entries merged over the inherited environment
	// (os.Environ() without the bridge credentials, see Inherited): the
	// agent entry's env first, then the BRIDGE_* variables (BridgeEnv) and
	// the run's agent token; a later entry wins over an earlier one with
	// the same key.
	Env []string
	// Secrets are the values no inherited variable may hold (Inherited):
	// the coordinator's own bridge token.
	Secrets []string
	// Timeout is adapter_timeout_s; zero means no timeout.
	Timeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL of the group.
	KillGrace time.Duration
	// MaxStdout is how many stdout bytes are kept; the rest is read and
	// discarded so the adapter never blocks on a full pipe.
	MaxStdout int64
	// MaxStderr is how many bytes of the end of stderr are kept.
	MaxStderr int
	// Progress, if not nil, is called with each good record the adapter
	// writes to its progress fd (ProgressFD), in order, from one goroutine;
	// every call has returned when Run returns. It must not block for
	// long: the adapter waits on a full pipe meanwhile.
	Progress func(ProgressRecord)
}

func (s Spec) withDefaults() Spec {
	if s.KillGrace <= 0 {
		s.KillGrace = DefaultKillGrace
	}
	if s.MaxStdout <= 0 {
		s.MaxStdout = DefaultMaxStdout
	}
	if s.MaxStderr <= 0 {
		s.MaxStderr = DefaultMaxStderr
	}
	return s
}

// Result is what became of one invocation. Exactly one of StartErr,
// Interrupted, Cancelled, TimedOut, Signaled or a non-zero ExitCode explains a failure;
// ErrorMessage words it for the thread.
type Result struct {
	// ExitCode is the process's exit status, -1 when it was killed by a
	// signal or never started.
	ExitCode int
	// Signaled reports that the process died from Signal.
	Signaled bool
	Signal   syscall.Signal
	// TimedOut reports that Spec.Timeout passed and the group was stopped.
	TimedOut bool
	// Interrupted reports that ctx was cancelled (coordinator shutdown)
	// and the group was stopped, or that ctx was already done before start.
	Interrupted bool
	// StartErr is set when the command could not be started: not found,
	// not executable, bad working directory.
	StartErr error
	// Stdout holds at most Spec.MaxStdout bytes of output, with NUL and
	// the C0 controls other than newline and tab removed (StripControls);
	// StdoutBytes is the total the adapter wrote and StdoutTruncated says
	// some was dropped.
	Stdout          []byte
	StdoutTruncated bool
	StdoutBytes     int64
	// StderrTail is the last Spec.MaxStderr bytes of stderr.
	StderrTail []byte
	// ProgressLines counts the lines written to the progress fd and
	// ProgressBad those of them that were not records (see ReadProgress).
	ProgressLines, ProgressBad int64
	// Cancelled reports that ctx was cancelled with cause ErrCancelled
	// (someone stopped the run) and the group was stopped; Interrupted is
	// then false.
	Cancelled bool
	// GaveUp reports that ctx was cancelled with cause ErrGaveUp (the
	// adapter had reported that its run failed) and the group was
	// stopped; Interrupted and Cancelled are then false.
	GaveUp bool
	// PID and PGID identify the adapter process and its group (equal:
	// the adapter leads its own group).
	PID, PGID         int
	Started, Finished time.Time
}

// OK reports whether the adapter ran to completion and exited 0, so its
// stdout is a reply to post.
func (r Result) OK() bool {
	return r.StartErr == nil && !r.Interrupted && !r.Cancelled && !r.GaveUp && !r.TimedOut && !r.Signaled && r.ExitCode == 0
}

// ErrCancelled is the cause to cancel Run's context with (see
// context.WithCancelCause) when a person stops the run: the group then gets
// CancelGrace instead of Spec.KillGrace and the result says Cancelled.
var ErrCancelled = errors.New("the run was cancelled")

// ErrGaveUp is the cause to cancel Run's context with when the adapter
// has reported that its run failed (a progress record with a failure) and
// the rest of it is not worth waiting for: a CLI that would retry a usage
// limit for minutes. The group gets CancelGrace and the result says
// GaveUp.
var ErrGaveUp = errors.New("the adapter reported that its run failed")

// CancelGrace is the time between SIGTERM and SIGKILL of a cancelled run
// (contract 5.4): someone is waiting for it to stop.
const CancelGrace = 2 * time.Second

// Run starts the adapter, writes payload to its stdin and closes it, and
// waits for it. onStart (may be nil) is called with the pid and pgid right
// after the start, before waiting, so the caller can record them for
// start-up reaping.
//
// The adapter leads its own process group. When Spec.Timeout passes or ctx
// is cancelled, the group gets SIGTERM, then SIGKILL after Spec.KillGrace.
// When the adapter itself exits, whatever it left running in its group is
// killed, so a background grandchild cannot hold the output pipes open or
// outlive the invocation. Run never returns before the adapter is reaped.
// It is safe for concurrent use.
func Run(ctx context.Context, spec Spec, payload []byte, onStart func(pid, pgid int)) (res Result) {
	spec = spec.withDefaults()
	res = Result{ExitCode: -1}
	res.Started = time.Now()
	defer func() { res.Finished = time.Now() }()
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		res.StartErr = errors.New("the adapter command is empty")
		return res
	}
	if ctx.Err() != nil {
		res.Cancelled, res.GaveUp, res.Interrupted = stopCause(ctx)
		return res
	}
	cmd, p, stdin, err := start(spec)
	if err != nil {
		res.StartErr = err
		return res
	}
	pgid := cmd.Process.Pid // Setpgid with Pgid 0: the adapter leads a new group.
	res.PID, res.PGID = cmd.Process.Pid, pgid

	out := collect(spec, p, &res)
	// The payload is written in its own goroutine: an adapter that never
	// reads stdin must not block Run. A write error (EPIPE when the adapter
	// exits without reading) is expected and ignored; Wait closes stdin.
	var writer sync.WaitGroup
	writer.Go(func() {
		_, _ = stdin.Write(payload)
		_ = stdin.Close()
	})
	// onStart (which records the run in the coordinator's ledger) comes
	// after the payload is on its way, so the adapter does not wait for it.
	if onStart != nil {
		onStart(res.PID, pgid)
	}
	esc := escalate(ctx, spec, pgid)
	waitErr := waitLeader(cmd, pgid, esc.stop)
	writer.Wait()
	out.drain(p)

	res.TimedOut, res.Interrupted, res.Cancelled, res.GaveUp = esc.timedOut, esc.interrupted, esc.cancelled, esc.gaveUp
	if st := cmd.ProcessState; st != nil {
		res.ExitCode = st.ExitCode()
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signaled = true
			res.Signal = ws.Signal()
		}
	} else if waitErr != nil {
		res.StartErr = fmt.Errorf("wait for %s: %w", spec.Command[0], waitErr)
	}
	// Stored as a reply, so NUL and other C0 controls go (contract 6.2).
	res.Stdout = StripControls(out.stdout.buf)
	res.StdoutBytes = out.stdout.total
	res.StdoutTruncated = out.stdout.total > int64(len(out.stdout.buf))
	res.StderrTail = out.stderr.Bytes()
	return res
}

// stopCause says why ctx ended: a person's cancel (ErrCancelled), the
// adapter's own failure (ErrGaveUp) or anything else, which interrupts
// the run.
func stopCause(ctx context.Context) (cancelled, gaveUp, interrupted bool) {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, ErrCancelled):
		return true, false, false
	case errors.Is(cause, ErrGaveUp):
		return false, true, false
	}
	return false, false, true
}

// runPipes are the read ends Run drains (stdout, stderr, the progress fd)
// and the write ends the adapter gets.
type runPipes struct {
	outR, outW, errR, errW, progR, progW *os.File
}

// closeAll closes every pipe end that is open (nil ones are skipped).
func (p runPipes) closeAll() {
	for _, f := range []*os.File{p.outR, p.outW, p.errR, p.errW, p.progR, p.progW} {
		if f != nil {
			f.Close()
		}
	}
}

// closeReads closes the read ends.
func (p runPipes) closeReads() {
	p.outR.Close()
	p.errR.Close()
	p.progR.Close()
}

// openPipes makes the three output pipes, or none.
func openPipes() (runPipes, error) {
	var p runPipes
	var err error
	if p.outR, p.outW, err = os.Pipe(); err != nil {
		return runPipes{}, fmt.Errorf("stdout pipe: %w", err)
	}
	if p.errR, p.errW, err = os.Pipe(); err != nil {
		p.closeAll()
		return runPipes{}, fmt.Errorf("stderr pipe: %w", err)
	}
	if p.progR, p.progW, err = os.Pipe(); err != nil {
		p.closeAll()
		return runPipes{}, fmt.Errorf("progress pipe: %w", err)
	}
	return p, nil
}

// start builds the adapter's command (argv, folder, environment, its own
// process group, the pipes) and starts it. On success the write ends are
// closed here (the adapter holds them) and the read ends are the caller's.
func start(spec Spec) (*exec.Cmd, runPipes, io.WriteCloser, error) {
	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	cmd.Dir = spec.Dir
	// os/exec keeps the last value of a duplicated key, which gives the
	// documented precedence: environment < entry env < BRIDGE_*.
	cmd.Env = append(Inherited(os.Environ(), spec.Secrets...), spec.Env...)
	cmd.SysProcAttr = sysProcAttr()
	// Our own pipes rather than io.Writers: os/exec would then wait in
	// Wait for the copy to reach EOF, which a grandchild holding the pipe
	// could delay forever. With *os.File, Wait returns when the adapter
	// exits and the draining is bounded (see collected.drain).
	p, err := openPipes()
	if err != nil {
		return nil, runPipes{}, nil, err
	}
	// The progress pipe is fd 3 in the adapter (ExtraFiles[0]).
	cmd.ExtraFiles = []*os.File{p.progW}
	cmd.Env = append(cmd.Env, EnvProgressFD+"="+strconv.Itoa(ProgressFD))
	cmd.Stdout, cmd.Stderr = p.outW, p.errW
	stdin, err := cmd.StdinPipe()
	if err != nil {
		p.closeAll()
		return nil, runPipes{}, nil, fmt.Errorf("stdin pipe: %w", err)
	}
	err = cmd.Start()
	p.outW.Close()
	p.errW.Close()
	p.progW.Close()
	if err != nil {
		p.closeReads()
		return nil, runPipes{}, nil, fmt.Errorf("start %s: %w", spec.Command[0], err)
	}
	return cmd, p, stdin, nil
}

// collected is what Run's readers gather from the adapter's output.
type collected struct {
	stdout  *cappedBuffer
	stderr  *tailBuffer
	readers sync.WaitGroup
}

// collect starts reading the adapter's stdout (capped), stderr (its tail)
// and progress lines (into res and spec.Progress).
func collect(spec Spec, p runPipes, res *Result) *collected {
	c := &collected{stdout: &cappedBuffer{max: spec.MaxStdout}, stderr: newTailBuffer(spec.MaxStderr)}
	c.readers.Go(func() { _, _ = io.Copy(c.stdout, p.outR) })
	c.readers.Go(func() { _, _ = io.Copy(c.stderr, p.errR) })
	c.readers.Go(func() {
		res.ProgressLines, res.ProgressBad = ReadProgress(p.progR, spec.Progress)
	})
	return c
}

// drain waits for the readers to reach EOF, at most drainTimeout after the
// adapter's group is gone, then closes the read ends.
func (c *collected) drain(p runPipes) {
	drained := make(chan struct{})
	go func() { c.readers.Wait(); close(drained) }()
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
		// Closing the read ends unblocks the readers.
		p.closeReads()
		<-drained
	}
	p.closeReads()
}

// escalation stops a run's process group on timeout or when ctx ends:
// SIGTERM, then SIGKILL after the grace. Its fields say which happened;
// they are read only after stop has returned.
type escalation struct {
	exited, done                             chan struct{}
	timedOut, interrupted, cancelled, gaveUp bool
}

// escalate starts the escalation goroutine of a run whose group is pgid.
// It is stopped (exited closed, done awaited) before the adapter is
// reaped, so it never signals a process group id that may have been
// recycled. This is why exec.CommandContext's Cancel and WaitDelay are not
// used: their final kill reaches only the leader, and nothing orders them
// before the reap.
func escalate(ctx context.Context, spec Spec, pgid int) *escalation {
	e := &escalation{exited: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(e.done)
		var deadline <-chan time.Time
		if spec.Timeout > 0 {
			t := time.NewTimer(spec.Timeout)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-e.exited:
			return
		case <-ctx.Done():
			e.cancelled, e.gaveUp, e.interrupted = stopCause(ctx)
		case <-deadline:
			e.timedOut = true
		}
		_ = signalGroup(pgid, syscall.SIGTERM)
		graceTime := spec.KillGrace
		if e.cancelled || e.gaveUp {
			graceTime = min(graceTime, CancelGrace)
		}
		grace := time.NewTimer(graceTime)
		defer grace.Stop()
		select {
		case <-e.exited:
		case <-grace.C:
			_ = signalGroup(pgid, syscall.SIGKILL)
		}
	}()
	return e
}

// stop ends the escalation and waits for its goroutine.
func (e *escalation) stop() {
	close(e.exited)
	<-e.done
}

// signalGroup sends sig to every process of the group; a group that no
// longer exists is not an error.
func signalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return fmt.Errorf("refusing to signal process group %d", pgid)
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal process group %d: %w", pgid, err)
	}
	return nil
}

// cappedBuffer keeps the first max bytes written and counts the rest, which
// it discards; it never fails, so the reader keeps draining the pipe.
type cappedBuffer struct {
	max   int64
	buf   []byte
	total int64
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	c.total += int64(n)
	room := c.max - int64(len(c.buf))
	if room <= 0 {
		return n, nil
	}
	p = p[:min(int64(n), room)]
	if need := len(c.buf) + len(p); need > cap(c.buf) {
		// Double, but never past the cap: append's own growth would
		// overshoot it and allocate several times more in total.
		grown := make([]byte, len(c.buf), min(max(2*cap(c.buf), need), int(c.max)))
		copy(grown, c.buf)
		c.buf = grown
	}
	c.buf = append(c.buf, p...)
	return n, nil
}

// tailBuffer is a fixed-size ring keeping the last bytes written.
type tailBuffer struct {
	buf  []byte
	pos  int
	full bool
}

func newTailBuffer(size int) *tailBuffer { return &tailBuffer{buf: make([]byte, size)} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(t.buf) == 0 {
		return n, nil
	}
	if len(p) >= len(t.buf) {
		copy(t.buf, p[len(p)-len(t.buf):])
		t.pos, t.full = 0, true
		return n, nil
	}
	for len(p) > 0 {
		k := copy(t.buf[t.pos:], p)
		p = p[k:]
		t.pos += k
		if t.pos == len(t.buf) {
			t.pos, t.full = 0, true
		}
	}
	return n, nil
}

// Bytes returns a copy of the kept bytes, oldest first.
func (t *tailBuffer) Bytes() []byte {
	if !t.full {
		return append([]byte(nil), t.buf[:t.pos]...)
	}
	out := make([]byte, 0, len(t.buf))
	out = append(out, t.buf[t.pos:]...)
	return append(out, t.buf[:t.pos]...)
}
