package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
	"github.com/bridge-runner/bridge-runner/record"
)

// window is the time range the panels are drawn over, and the step of
// Prometheus's evaluation within it.
type window struct {
	Start, End time.Time
	Step       time.Duration
}

// series is one line of a panel: its labels and its points (NaN and
// infinite values left out, as gaps).
type series struct {
	Labels map[string]string
	Points []point
}

type point struct {
	T time.Time
	V float64
}

// prometheus asks one Prometheus's HTTP API.
type prometheus struct {
	base   string
	client *http.Client
	// tries bounds the attempts of one query on a transient fault.
	tries int
}

// errRefused is a query Prometheus answered with an error (bad_data,
// execution, ...): the dashboard's fault, not the network's.
var errRefused = errors.New("Prometheus refused the query")

// queryRange evaluates expr over w (GET /api/v1/query_range). A transport
// fault or a 5xx is retried with jittered back-off, at most p.tries
// times; an answer with status "error" is errRefused, with Prometheus's
// errorType and its error text scrubbed (both documented fields).
func (p *prometheus) queryRange(ctx context.Context, expr string, w window) ([]series, error) {
	q := url.Values{}
	q.Set("query", expr)
	q.Set("start", strconv.FormatFloat(float64(w.Start.UnixMilli())/1000, 'f', 3, 64))
	q.Set("end", strconv.FormatFloat(float64(w.End.UnixMilli())/1000, 'f', 3, 64))
	q.Set("step", strconv.FormatFloat(w.Step.Seconds(), 'f', -1, 64))
	req := httpx.Request{Method: http.MethodGet, URL: p.base + "/api/v1/query_range?" + q.Encode(),
		Timeout: 30 * time.Second, Server: "Prometheus", Field: "-prometheus"}
	bo := record.Backoff{Initial: 500 * time.Millisecond, Max: 8 * time.Second}
	var err error
	for try := 1; ; try++ {
		var out []series
		if out, err = p.once(ctx, req); err == nil || !errors.Is(err, backends.ErrTransient) || try >= p.tries {
			return out, err
		}
		if !record.SleepCtx(ctx, bo.Next()) {
			return nil, ctx.Err()
		}
	}
}

// promAnswer is the documented envelope of Prometheus's API answers.
type promAnswer struct {
	Status, ErrorType, Error string
	Data                     struct {
		ResultType string
		Result     []struct {
			Metric map[string]string
			Values [][2]any
		}
	}
}

func (p *prometheus) once(ctx context.Context, req httpx.Request) ([]series, error) {
	resp, err := httpx.Open(ctx, p.client, req)
	if err != nil {
		return nil, err
	}
	status := resp.StatusCode
	body, err := httpx.ReadAll(ctx, req.Op(), resp, 64<<20)
	if err != nil {
		return nil, err
	}
	var a promAnswer
	if jerr := json.Unmarshal(body, &a); jerr != nil || a.Status == "" {
		if httpx.IsTransient(status) {
			return nil, backends.Transient(fmt.Errorf("%s: HTTP %d", req.Op(), status))
		}
		return nil, fmt.Errorf("%s: HTTP %d, %s", req.Op(), status, httpx.NotShown)
	}
	if a.Status != "success" {
		if httpx.IsTransient(status) && a.ErrorType != "bad_data" {
			return nil, backends.Transient(fmt.Errorf("%s: HTTP %d %s", req.Op(), status, a.ErrorType))
		}
		return nil, fmt.Errorf("%w: %s: %s", errRefused, httpx.Reason(a.ErrorType), httpx.Reason(a.Error))
	}
	if a.Data.ResultType != "matrix" {
		return nil, fmt.Errorf("%w: a range query answered with a %q, not a matrix", errRefused, a.Data.ResultType)
	}
	out := make([]series, 0, len(a.Data.Result))
	for _, r := range a.Data.Result {
		s := series{Labels: r.Metric}
		for _, v := range r.Values {
			ts, _ := v[0].(float64)
			str, _ := v[1].(string)
			f, err := strconv.ParseFloat(str, 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				continue
			}
			s.Points = append(s.Points, point{time.UnixMilli(int64(math.Round(ts * 1000))).UTC(), f})
		}
		out = append(out, s)
	}
	return out, nil
}
