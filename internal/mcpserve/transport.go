package mcpserve

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
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/wtx-dev/wtx/internal/failpoint"
)

// DefaultMaxRequest is the largest request line the server takes, in bytes.
const DefaultMaxRequest = 16 << 20

// idPrefix is how much of an oversized line is kept to find its request id.
const idPrefix = 64 << 10

// lineTransport is newline-delimited JSON-RPC over a pair of streams that,
// unlike the SDK's own stdio transport, survives a bad line: a line that is
// not JSON, not a JSON-RPC message, a batch, or longer than max bytes gets a
// JSON-RPC error reply (with the request's id when it can be found) and the
// server reads on. Only the end of the input, or a failed read, ends it, and
// only once every request read before it has been answered: a script that
// writes its requests and closes its end gets every answer. The end of the
// input is also how a client shuts the server down (MCP's stdio transport),
// so calls still running after grace are stopped (stop), and their
// answers, saying so, are the last the server writes.
type lineTransport struct {
	in    io.ReadCloser
	out   io.WriteCloser
	max   int
	log   *slog.Logger
	grace time.Duration
	stop  func()
}

// DefaultEndGrace is how long calls still running when the input ends may
// go on before they are stopped.
const DefaultEndGrace = 2 * time.Second

// endWait bounds the wait for the answers of stopped calls: a command is
// stopped within seconds (SIGTERM, then SIGKILL).
const endWait = 30 * time.Second

func (t *lineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{in: t.in, out: t.out, max: t.max, log: t.log, grace: t.grace, stop: t.stop,
		incoming: make(chan readResult), closed: make(chan struct{}),
		pending: map[any]bool{}, answered: make(chan struct{}, 1)}
	if c.max <= 0 {
		c.max = DefaultMaxRequest
	}
	go c.readLoop()
	return c, nil
}

type readResult struct {
	msg jsonrpc.Message
	err error
}

type lineConn struct {
	in    io.ReadCloser
	out   io.WriteCloser
	max   int
	log   *slog.Logger
	grace time.Duration
	stop  func()

	incoming chan readResult
	wmu      sync.Mutex

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error

	// pending holds the ids of requests handed to the server and not yet
	// answered; answered is signalled each time one is.
	pmu      sync.Mutex
	pending  map[any]bool
	answered chan struct{}
}

func (c *lineConn) SessionID() string { return "" }

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case r := <-c.incoming:
		return r.msg, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, io.EOF
	}
}

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	err = c.writeLine(data)
	if r, ok := msg.(*jsonrpc.Response); ok {
		c.settle(r.ID)
	}
	return err
}

// track notes a request that will need an answer. A request the client
// cancels needs none (MCP: the server does not answer it), so the
// cancellation notice settles it.
func (c *lineConn) track(msg jsonrpc.Message) {
	r, ok := msg.(*jsonrpc.Request)
	switch {
	case !ok:
	case r.IsCall():
		c.pmu.Lock()
		c.pending[r.ID.Raw()] = true
		c.pmu.Unlock()
	case r.Method == "notifications/cancelled":
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(r.Params, &p) != nil {
			return
		}
		if id, err := jsonrpc.MakeID(p.RequestID); err == nil && id.IsValid() {
			c.settle(id)
		}
	}
}

// settle notes that the request with this id has been answered.
func (c *lineConn) settle(id jsonrpc.ID) {
	c.pmu.Lock()
	delete(c.pending, id.Raw())
	c.pmu.Unlock()
	select {
	case c.answered <- struct{}{}:
	default:
	}
}

// drain waits until every tracked request has been answered, or the
// connection is closed. Calls still running after the grace period are
// stopped, and their answers waited for a while longer.
func (c *lineConn) drain() {
	grace := time.NewTimer(c.grace)
	defer grace.Stop()
	var bound <-chan time.Time
	for {
		c.pmu.Lock()
		n := len(c.pending)
		c.pmu.Unlock()
		if n == 0 || failpoint.Disabled("mcp-drain") {
			return
		}
		select {
		case <-c.answered:
		case <-c.closed:
			return
		case <-grace.C:
			if c.stop != nil {
				c.stop()
			}
			bound = time.After(endWait)
		case <-bound:
			return
		}
	}
}

func (c *lineConn) writeLine(data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.out.Write(append(data, '\n'))
	return err
}

func (c *lineConn) Close() error {
	c.closeOnce.Do(func() {
		c.closeErr = errors.Join(c.in.Close(), c.out.Close())
		close(c.closed)
	})
	return c.closeErr
}

func (c *lineConn) deliver(r readResult) bool {
	select {
	case c.incoming <- r:
		return true
	case <-c.closed:
		return false
	}
}

// readLoop frames the input into lines and hands each good message to Read.
func (c *lineConn) readLoop() {
	br := bufio.NewReaderSize(c.in, 64<<10)
	for {
		line, over, err := readLine(br, c.max)
		if len(bytes.TrimSpace(line)) > 0 || over {
			if msg := c.decode(line, over); msg != nil {
				c.track(msg)
				if !c.deliver(readResult{msg: msg}) {
					return
				}
			}
		}
		if err != nil {
			// The end of the input ends the session only after the
			// answers to everything read before it are out.
			c.drain()
			c.deliver(readResult{err: err})
			return
		}
	}
}

// readLine reads one line. When the line is longer than max, the line's
// first idPrefix bytes are returned with over set, and the rest of the line
// is read and discarded.
func readLine(br *bufio.Reader, max int) (line []byte, over bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !over && len(line)+len(chunk) > max+2 { // room for "\r\n"
			over = true
		}
		if keep := len(chunk); !over || len(line) < idPrefix {
			if over && len(line)+keep > idPrefix {
				keep = idPrefix - len(line)
			}
			line = append(line, chunk[:keep]...)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err != nil:
			return line, over, err
		case over:
			return line, true, nil
		default:
			return bytes.TrimRight(line, "\r\n"), false, nil
		}
	}
}

// decode turns a line into a message, or answers it with a JSON-RPC error
// and returns nil.
func (c *lineConn) decode(line []byte, over bool) jsonrpc.Message {
	if over {
		c.reply(peekID(line), jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("request is longer than %d bytes; it was discarded", c.max))
		return nil
	}
	trimmed := bytes.TrimSpace(line)
	if !json.Valid(trimmed) {
		c.reply(nil, jsonrpc.CodeParseError, "parse error: the line is not a JSON value")
		return nil
	}
	if trimmed[0] == '[' {
		c.reply(nil, jsonrpc.CodeInvalidRequest, "batches are not supported; send one request per line")
		return nil
	}
	msg, err := jsonrpc.DecodeMessage(trimmed)
	if err != nil {
		c.reply(peekID(trimmed), jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
		return nil
	}
	return msg
}

// wireError is a JSON-RPC error response; unlike the SDK's encoding it
// keeps "id": null when the request's id is unknown, as JSON-RPC requires.
type wireError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (c *lineConn) reply(id json.RawMessage, code int64, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	w := wireError{JSONRPC: "2.0", ID: id}
	w.Error.Code, w.Error.Message = code, msg
	data, err := json.Marshal(w)
	if err == nil {
		err = c.writeLine(data)
	}
	if c.log != nil {
		c.log.Warn("bad request line", "code", code, "message", msg, "reply_error", err)
	}
}

// peekID finds a top-level "id" member that is a string or a number in
// what may be only the start of a JSON object.
func peekID(data []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil
		}
		if key, _ := tok.(string); key == "id" {
			var v any
			if json.Unmarshal(raw, &v) != nil {
				return nil
			}
			switch v.(type) {
			case string, float64:
				return raw
			}
			return nil
		}
	}
	return nil
}
