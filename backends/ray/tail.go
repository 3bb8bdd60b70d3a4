package ray

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// Job output comes from Ray's logs tail: GET /api/jobs/{id}/logs/tail, a
// WebSocket on which the dashboard sends the driver's log as TEXT messages,
// from its first byte on, then what is appended (it looks once a second),
// and which it closes after the job ended and the log's end was sent. One
// stream per job stays open while invoke follows it; a goroutine receives
// into a bounded buffer and ReadLogs takes what has arrived, never waiting
// for more (the runner decides when to read). A stream that breaks is opened
// again and the part already shown skipped. Each byte crosses the network
// once per stream, instead of the whole log on every read.

const (
	// maxTailBuffer bounds what a stream holds that ReadLogs has not taken;
	// beyond it, the receiving goroutine stops reading (TCP pushes back).
	maxTailBuffer = 1 << 20
	// maxTailMessage bounds one message; Ray sends at most 10 lines or
	// about 20,000 characters in one.
	maxTailMessage = 8 << 20
	// endWait bounds the wait for Ray to send the log's end and close the
	// stream, once the job is known to have ended.
	endWait = 10 * time.Second
)

// tail is one open logs/tail stream.
type tail struct {
	conn *websocket.Conn
	mu   sync.Mutex
	cond *sync.Cond
	buf  []byte // received, not yet taken
	next int64  // the job-output offset of what ReadLogs takes next
	skip int64  // bytes of the stream still to drop: shown before it opened
	done bool   // the stream ended
	err  error  // why, when not the job's end
}

// openTail opens the stream of job id, skipping the first offset bytes.
func (b *Backend) openTail(ctx context.Context, id string, offset int64) (*tail, error) {
	u := *b.base
	u.Path = b.base.Path + "/api/jobs/" + url.PathEscape(id) + "/logs/tail"
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	d := httpx.NewWebSocketDialer(b.client, 30*time.Second, 64<<10) // the user's TLS settings (CA bundle, verification)
	conn, err := b.dialTail(ctx, d, &u, id)
	if err != nil {
		return nil, err
	}
	conn.SetReadLimit(maxTailMessage)
	t := &tail{conn: conn, next: offset, skip: offset}
	t.cond = sync.NewCond(&t.mu)
	go t.receive()
	return t, nil
}

// dialTail opens the WebSocket at u. The dialer follows no redirect; one
// that httpx's policy allows (same origin, at most httpx.MaxRedirects) is
// followed here, as the REST calls follow theirs, and any other is refused
// with the token unsent.
func (b *Backend) dialTail(ctx context.Context, d *websocket.Dialer, u *url.URL, id string) (*websocket.Conn, error) {
	h := http.Header{}
	tok, why := b.token()
	if tok != "" {
		h.Set("Authorization", "Bearer "+tok)
	}
	op := "GET " + u.EscapedPath()
	for hops := 1; ; hops++ {
		conn, resp, err := d.DialContext(ctx, u.String(), h)
		if err == nil {
			return conn, nil
		}
		loc := redirectTarget(resp)
		if loc == nil {
			return nil, b.tailError(id, resp, why, err)
		}
		next := u.ResolveReference(loc)
		if rerr := httpx.CheckRedirectURL(u, next, hops); rerr != nil {
			return nil, httpx.RedirectError(rerr, "the Ray dashboard", op, "resourceURL")
		}
		switch next.Scheme { // the dialer speaks ws and wss only
		case "http":
			next.Scheme = "ws"
		case "https":
			next.Scheme = "wss"
		}
		u = next
	}
}

// redirectTarget is the Location of a redirect answer (closing its body),
// or nil for any other answer.
func redirectTarget(resp *http.Response) *url.URL {
	if resp == nil {
		return nil
	}
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	default:
		return nil
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.Header.Get("Location") == "" {
		return nil
	}
	resp.Body.Close()
	return loc
}

// tailError explains a failed handshake.
func (b *Backend) tailError(id string, resp *http.Response, noToken string, err error) error {
	if resp == nil {
		return backends.Transient(fmt.Errorf("opening the log stream of ray job %s: %w", id, err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	r := &response{status: resp.StatusCode, body: body, noToken: noToken}
	if r.status == http.StatusNotFound {
		return fmt.Errorf("ray job %s: %s: %w", id, r.text(), backends.ErrNotFound)
	}
	return b.statusError(r, "opening the log stream of ray job "+id)
}

// receive copies messages into buf until the stream ends.
func (t *tail) receive() {
	for {
		_, msg, err := t.conn.ReadMessage()
		t.mu.Lock()
		if err != nil {
			t.done = true
			if !websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseNoStatusReceived) {
				t.err = err
			}
			t.cond.Broadcast()
			t.mu.Unlock()
			_ = t.conn.Close()
			return
		}
		drop := min(t.skip, int64(len(msg)))
		t.skip -= drop
		t.buf = append(t.buf, msg[drop:]...)
		t.cond.Broadcast()
		for len(t.buf) > maxTailBuffer && !t.done {
			t.cond.Wait()
		}
		t.mu.Unlock()
	}
}

// take returns what has arrived; with a non-zero until it first waits, up
// to then, for something to arrive or the stream to end.
func (t *tail) take(until time.Time) (data []byte, done bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !until.IsZero() && !t.done && len(t.buf) == 0 {
		timer := time.AfterFunc(time.Until(until), func() {
			t.mu.Lock()
			t.cond.Broadcast()
			t.mu.Unlock()
		})
		for !t.done && len(t.buf) == 0 && time.Now().Before(until) {
			t.cond.Wait()
		}
		timer.Stop()
	}
	data, t.buf = t.buf, nil
	t.cond.Broadcast()
	return data, t.done, t.err
}

// noteEnd remembers that job id ended, so that ReadLogs reads its log to the end.
func (b *Backend) noteEnd(id string, st backends.State) {
	if st.Final() {
		if b.ended == nil {
			b.ended = map[string]bool{}
		}
		b.ended[id] = true
	}
}

func (t *tail) close() {
	_ = t.conn.Close()
}

// ReadLogs writes the job's output from offset on, as far as it has arrived
// on the job's stream (opened on first use, and again if it broke). Once
// Status saw the job end, it reads on to the stream's end, which Ray sends
// within a few seconds (each wait for more bounded by endWait).
func (b *Backend) ReadLogs(ctx context.Context, id string, offset int64, w io.Writer) (int64, error) {
	if b.tails == nil {
		b.tails = map[string]*tail{}
	}
	t := b.tails[id]
	if t != nil && t.next != offset {
		t.close() // the caller's offset moved: start over from there
		t = nil
	}
	if t == nil {
		var err error
		if t, err = b.openTail(ctx, id, offset); err != nil {
			return offset, err
		}
		b.tails[id] = t
	}
	ended := b.ended[id]
	for {
		var until time.Time
		if ended {
			until = time.Now().Add(endWait)
		}
		data, done, err := t.take(until)
		n, werr := w.Write(data)
		t.next += int64(n)
		if werr != nil {
			return t.next, werr
		}
		if done {
			delete(b.tails, id)
			if err == nil && !ended {
				err = errors.New("the log stream closed before the job ended")
			}
			if err != nil {
				return t.next, backends.Transient(fmt.Errorf("log stream of ray job %s: %w (opened again at the next read)", id, err))
			}
			return t.next, nil
		}
		if !ended || len(data) == 0 || ctx.Err() != nil {
			return t.next, ctx.Err()
		}
	}
}
