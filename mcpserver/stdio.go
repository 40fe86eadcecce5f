package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// JSON-RPC error codes the line guard answers with (JSON-RPC 2.0, section
// 5.1).
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// maxLine caps one inbound line: the SDK's own cap on a frame.
const maxLine = mcp.DefaultMaxLineLength

// lineGuard is the stdio transport the server really runs on: the SDK
// ends a session on the first line it cannot decode, and with it the
// answers to the calls still in flight. The guard reads stdin line by
// line (the MCP stdio framing), answers a line that is not JSON with a
// -32700 parse error and one that is JSON but no JSON-RPC message with
// -32600, and hands every good line to the SDK's IOTransport through a
// pipe. Both it and the SDK write whole lines to the one output under one
// lock, so their lines never interleave.
type lineGuard struct {
	in  io.Reader
	out *lockedWriter
	log *slog.Logger
}

// Connect implements mcp.Transport.
func (g *lineGuard) Connect(ctx context.Context) (mcp.Connection, error) {
	pr, pw := io.Pipe()
	go g.pump(pw)
	t := &mcp.IOTransport{Reader: &guardedReader{PipeReader: pr, in: g.in}, Writer: g.out}
	return t.Connect(ctx)
}

// pump copies good lines to pw and answers bad ones, until stdin ends or
// the session closes the pipe.
func (g *lineGuard) pump(pw *io.PipeWriter) {
	br := bufio.NewReaderSize(g.in, 64<<10)
	for {
		line, tooLong, err := readLine(br)
		if len(line) > 0 || tooLong {
			if werr := g.handle(pw, line, tooLong); werr != nil {
				_ = pw.CloseWithError(werr)
				return
			}
		}
		if err != nil {
			_ = pw.CloseWithError(err) // io.EOF: a clean end for the SDK
			return
		}
	}
}

// handle passes one line on or answers it.
func (g *lineGuard) handle(pw *io.PipeWriter, line []byte, tooLong bool) error {
	trimmed := bytes.TrimSpace(line)
	switch {
	case tooLong:
		g.log.Warn("mcp: dropped a line over the length limit", "limit", maxLine)
		return g.answer(nil, codeParseError, fmt.Sprintf("Parse error: a line is longer than %d bytes.", maxLine))
	case len(trimmed) == 0:
		return nil
	case !json.Valid(trimmed):
		g.log.Warn("mcp: a line is not JSON", "bytes", len(trimmed))
		return g.answer(nil, codeParseError, "Parse error: the line is not JSON; each line must hold one JSON-RPC message.")
	case trimmed[0] == '[':
		// A batch (protocol versions before 2025-06-18): the SDK ends the
		// session on one bad element too.
		var batch []json.RawMessage
		if json.Unmarshal(trimmed, &batch) != nil || len(batch) == 0 {
			return g.answer(nil, codeInvalidRequest, "Invalid Request: a batch must be a non-empty array of JSON-RPC messages.")
		}
		for _, m := range batch {
			if _, err := jsonrpc.DecodeMessage(m); err != nil {
				g.log.Warn("mcp: a batch holds something that is no JSON-RPC message", "err", err)
				return g.answer(nil, codeInvalidRequest, "Invalid Request: every element of a batch must be a JSON-RPC 2.0 request, notification or response.")
			}
		}
	default:
		if _, err := jsonrpc.DecodeMessage(trimmed); err != nil {
			g.log.Warn("mcp: a line is no JSON-RPC message", "err", err)
			return g.answer(requestID(trimmed), codeInvalidRequest, "Invalid Request: the line is JSON but not a JSON-RPC 2.0 request, notification or response.")
		}
	}
	_, err := pw.Write(append(trimmed, '\n'))
	return err
}

// answer writes one JSON-RPC error response with id (null when unknown).
func (g *lineGuard) answer(id json.RawMessage, code int, msg string) error {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	if err != nil {
		return fmt.Errorf("encode parse error: %w", err)
	}
	_, err = g.out.Write(append(b, '\n'))
	return err
}

// requestID returns the id of a JSON object line when it is a string or a
// number, so that an invalid request still gets its answer matched.
func requestID(line []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 {
		return nil
	}
	switch m.ID[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return m.ID
	}
	return nil
}

// readLine reads one line of at most maxLine bytes; a longer line is read
// to its end and dropped (tooLong).
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(frag) > maxLine {
				tooLong, line = true, nil
			} else {
				line = append(line, frag...)
			}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, tooLong, err
		}
	}
}

// guardedReader is the SDK's end of the pipe. Closing it also closes stdin
// when stdin can be closed, so that the pump stops too.
type guardedReader struct {
	*io.PipeReader
	in io.Reader
}

// Close implements io.Closer.
func (r *guardedReader) Close() error {
	err := r.PipeReader.Close()
	if c, ok := r.in.(io.Closer); ok {
		err = errors.Join(err, c.Close())
	}
	return err
}

// lockedWriter serialises whole-line writes to the protocol stream.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write implements io.Writer.
func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// Close implements io.Closer, closing the underlying writer when it can
// be closed.
func (w *lockedWriter) Close() error {
	if c, ok := w.w.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
