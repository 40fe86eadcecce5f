package adapters

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// ProgressFD is the file descriptor an adapter writes progress lines to;
// EnvProgressFD carries its number, so a script can write to it without
// hard-coding 3 and can tell whether it is there at all.
const (
	ProgressFD    = 3
	EnvProgressFD = "BRIDGE_PROGRESS_FD"
)

// MaxProgressLine is the longest progress line (without its newline) that
// is parsed; a longer one is counted as bad and skipped without being held
// in memory whole.
const MaxProgressLine = 8 << 10

// maxFailureMessage bounds a failure's message, in runes: one line for
// people.
const maxFailureMessage = 300

// Usage is what a run has consumed so far. An adapter reports it
// cumulatively, so the last record that carries it is the run's total.
type Usage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
}

// ProgressRecord is one line an adapter wrote to its progress fd
// (contract 5.3): a status for people plus optional machine detail.
type ProgressRecord struct {
	// Status is one line for people ("Bash: go test ./...").
	Status string `json:"status"`
	// Kind classifies the record: tool, text, thinking, usage, session,
	// other, or anything the adapter chooses.
	Kind string `json:"kind,omitempty"`
	// Detail is any JSON the adapter attaches; nil when absent.
	Detail json.RawMessage `json:"detail,omitempty"`
	// Usage is the run's cumulative usage, nil when the line has none.
	Usage *Usage `json:"usage,omitempty"`
	// Session is the CLI's own session id, so the coordinator can resume
	// it on the pair's next turn.
	Session string `json:"session,omitempty"`
	// Failure, when set, says the run has failed and why (contract 8.5):
	// the coordinator ends the run at once (its process group gets
	// SIGTERM, SIGKILL 2 s later) and records this failure. claude says a
	// usage limit long before it gives up retrying; this is how an
	// adapter says so without waiting for the CLI.
	Failure *agentbridge.Failure `json:"failure,omitempty"`
}

// errBadProgress is wrapped by every ParseProgress error.
var errBadProgress = errors.New("bad progress line")

// ParseProgress parses one progress line (without its newline). It must be
// a JSON object whose status is a string; kind and session, when present,
// must be strings, usage an object of numbers, and detail any JSON value.
// Unknown keys are ignored so that adapters may add their own.
func ParseProgress(line []byte) (ProgressRecord, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return ProgressRecord{}, fmt.Errorf("%w: not a JSON object", errBadProgress)
	}
	var raw struct {
		Status  *string         `json:"status"`
		Kind    *string         `json:"kind"`
		Detail  json.RawMessage `json:"detail"`
		Usage   *Usage          `json:"usage"`
		Session *string         `json:"session"`
		Failure *struct {
			Class   string `json:"class"`
			RetryAt string `json:"retry_at"`
			Message string `json:"message"`
		} `json:"failure"`
	}
	if err := json.Unmarshal(line, &raw); err != nil {
		return ProgressRecord{}, fmt.Errorf("%w: %v", errBadProgress, err)
	}
	if raw.Status == nil {
		return ProgressRecord{}, fmt.Errorf("%w: no status", errBadProgress)
	}
	rec := ProgressRecord{Status: *raw.Status, Usage: raw.Usage}
	if raw.Kind != nil {
		rec.Kind = *raw.Kind
	}
	if raw.Session != nil {
		rec.Session = *raw.Session
	}
	// json.Unmarshal copies a RawMessage, so the line's buffer may be
	// reused by the caller.
	if len(raw.Detail) > 0 && !bytes.Equal(raw.Detail, []byte("null")) {
		rec.Detail = raw.Detail
	}
	if u := rec.Usage; u != nil && (u.InputTokens < 0 || u.OutputTokens < 0 || u.CostUSD < 0) {
		return ProgressRecord{}, fmt.Errorf("%w: negative usage", errBadProgress)
	}
	if f := raw.Failure; f != nil {
		if !agentbridge.ValidFailureClass(f.Class) {
			return ProgressRecord{}, fmt.Errorf("%w: failure class %q is not one of %v", errBadProgress, f.Class, agentbridge.FailureClasses)
		}
		rec.Failure = &agentbridge.Failure{Class: f.Class, Message: agentbridge.Clip(f.Message, maxFailureMessage)}
		if f.RetryAt != "" {
			t, err := time.Parse(time.RFC3339Nano, f.RetryAt)
			if err != nil {
				return ProgressRecord{}, fmt.Errorf("%w: failure retry_at %q is not an RFC 3339 time", errBadProgress, f.RetryAt)
			}
			rec.Failure.RetryAt = agentbridge.FormatTime(t)
		}
	}
	return rec, nil
}

// ReadProgress reads progress lines from r until EOF or a read error and
// calls fn (if not nil) with each good record. It returns how many lines it
// saw and how many of them were bad (not a record, or longer than
// MaxProgressLine). Memory stays bounded whatever r delivers: a long line is
// skipped as it is read. A final line without a newline counts.
func ReadProgress(r io.Reader, fn func(ProgressRecord)) (lines, bad int64) {
	br := bufio.NewReaderSize(r, MaxProgressLine+1)
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			// Keep reading to the end of this line, discarding it.
			tooLong = true
			continue
		case err != nil && len(chunk) == 0 && !tooLong:
			return lines, bad
		}
		lines++
		if tooLong || len(bytes.TrimRight(chunk, "\n")) > MaxProgressLine {
			bad++
		} else if rec, perr := ParseProgress(bytes.TrimRight(chunk, "\r\n")); perr != nil {
			bad++
		} else if fn != nil {
			fn(rec)
		}
		tooLong = false
		if err != nil {
			return lines, bad
		}
	}
}
