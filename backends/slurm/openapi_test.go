package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/internal/testutil"
)

// bigOpenAPI is a /openapi/v3 document shaped like slurmrestd's (info,
// components with many schemas, then paths) of about size bytes.
func bigOpenAPI(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"openapi":"3.0.2","info":{"title":"Slurm REST API","version":"Slurm-24.11.5&openapi/slurmctld"},"tags":[{"name":"slurm"}],"components":{"schemas":{`)
	pad := bytes.Repeat([]byte("x"), 1000)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"s%d":{"type":"object","properties":{"a":{"type":"string","description":"%s"},"b":[1,2.5,true,null,{"c":"\u00e9"}]}}`, i, pad)
	}
	b.WriteString(`}},"paths":{"/slurm/v0.0.41/ping/":{"get":{"responses":{}}},"/slurm/v0.0.42/jobs/":{"get":{}},"/slurmdb/v0.0.42/jobs/":{"get":{}}}}`)
	return b.Bytes()
}

// Discovery reads /openapi/v3 as a stream: a document of 4 MB allocates a
// fraction of its size (held whole, it allocated at least its size, which
// was an invoke's largest use of the heap), and the answer is the same.
func TestDiscoverStreamsOpenAPI(t *testing.T) {
	doc := bigOpenAPI(4 << 20)
	for _, ctype := range []string{"application/json", ""} {
		tr := testutil.RoundTripFunc(func(*http.Request) *http.Response { return testutil.Response(200, ctype, doc) })
		be, err := New(backends.Config{URL: "http://slurm.test:6820", HTTPClient: &http.Client{Transport: tr},
			Credentials: testutil.MapCreds{"username": "u", "token": "t0ken"}})
		require.NoError(t, err)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		v, release, err := be.(*Backend).discoverOpenAPI(context.Background())
		runtime.ReadMemStats(&after)
		require.NoError(t, err, "content type %q", ctype)
		assert.Equal(t, apiVersion(42), v)
		assert.Equal(t, "24.11.5", release)
		alloc := after.TotalAlloc - before.TotalAlloc
		if ctype == "" { // no content type: read whole, to see whether it is JSON at all
			assert.Greater(t, alloc, uint64(len(doc)), "the fallback reads the answer whole")
			continue
		}
		assert.Less(t, alloc, uint64(len(doc)/8), "discovery allocated %d bytes for a %d-byte document", alloc, len(doc))
	}
}

// A connection that breaks while the document streams in is transient (as
// a failure while reading any answer is), not a document that is wrong;
// a document that is wrong is not transient.
func TestDiscoverOpenAPIReadFailure(t *testing.T) {
	doc := bigOpenAPI(64 << 10)
	for _, c := range []struct {
		body      io.Reader
		transient bool
	}{
		{io.MultiReader(bytes.NewReader(doc[:len(doc)/2]), errReader{}), true},
		{bytes.NewReader(doc[:len(doc)/2]), false},
		{bytes.NewReader([]byte(`["not", "an", "object"]`)), false},
	} {
		tr := testutil.RoundTripFunc(func(*http.Request) *http.Response {
			h := http.Header{"Content-Type": {"application/json"}}
			return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(c.body), ContentLength: -1}
		})
		be, err := New(backends.Config{URL: "http://slurm.test:6820", HTTPClient: &http.Client{Transport: tr},
			Credentials: testutil.MapCreds{"username": "u", "token": "t0ken"}})
		require.NoError(t, err)
		_, _, err = be.(*Backend).discoverOpenAPI(context.Background())
		require.Error(t, err)
		assert.Equal(t, c.transient, errors.Is(err, backends.ErrTransient), err.Error())
		assert.Contains(t, err.Error(), "GET /openapi/v3")
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset by peer") }
