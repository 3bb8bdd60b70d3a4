package lsf

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"

	"github.com/bridge-runner/bridge-runner/backends"

	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// appParam is one application parameter of the submit's data part.
type appParam struct {
	XMLName xml.Name `xml:"AppParam"`
	ID      string   `xml:"id"`
	Value   string   `xml:"value"`
	Type    string   `xml:"type"`
}

func boundary() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "br" + hex.EncodeToString(b)
}

// writeSubmit writes the multipart/mixed submit body.
func writeSubmit(ctx context.Context, w io.Writer, sp *spec, outer, inner string) error {
	mw := multipart.NewWriter(w)
	if err := mw.SetBoundary(outer); err != nil {
		return err
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="AppName"`)
	h.Set("Content-ID", "<AppName>")
	pw, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(pw, sp.app); err != nil {
		return err
	}
	data, err := dataPart(sp, inner)
	if err != nil {
		return err
	}
	h = textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="data"`)
	h.Set("Content-ID", "<data>")
	h.Set("Content-Type", "multipart/mixed; boundary="+inner)
	if pw, err = mw.CreatePart(h); err != nil {
		return err
	}
	if _, err := pw.Write(data); err != nil {
		return err
	}
	for _, f := range sp.files {
		if err := writeFile(ctx, mw, f); err != nil {
			return err
		}
	}
	return mw.Close()
}

// Submit submits the job to the application and returns the LSF job id.
func (b *Backend) Submit(ctx context.Context, job backends.Job) (string, error) {
	sp, err := buildSpec(job)
	if err != nil {
		return "", err
	}
	return b.submit(ctx, sp)
}

// submit sends the submit request for sp and returns the LSF job id.
func (b *Backend) submit(ctx context.Context, sp *spec) (string, error) {
	if len(sp.ignored) > 0 && b.log != nil {
		b.log.Info("ignoring IBM Bridge Operator job properties: jobdata.additionalData files are uploaded with the job", "keys", sp.ignored)
	}
	outer, inner := boundary(), boundary()
	var total int64
	for _, f := range sp.files {
		total += max(f.size(), 0)
	}
	body := func() (io.Reader, error) {
		if total <= maxBufferedSubmit {
			var buf bytes.Buffer
			if err := writeSubmit(ctx, &buf, sp, outer, inner); err != nil {
				return nil, err
			}
			return bytes.NewReader(buf.Bytes()), nil
		}
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeSubmit(ctx, pw, sp, outer, inner)) }()
		return pr, nil
	}
	r := request{method: http.MethodPost, path: "/ws/jobs/submit", contentType: "multipart/mixed; boundary=" + outer,
		accept: "application/json", body: body}
	buf, err := b.do(ctx, r)
	if err != nil {
		if se := asStatus(err); se != nil && (se.status == http.StatusBadRequest || se.status == http.StatusUnprocessableEntity) {
			return "", backends.Invalid("jobproperties", "Application Center refused the job: %s", orText(httpx.Reason(se.msg), "bad request"))
		}
		return "", transientOr(err)
	}
	doc, err := decodeDoc(buf)
	if err != nil {
		return "", fmt.Errorf("%s: cannot read the answer: %w", r, err)
	}
	id := str(get(doc, "id", "jobId"))
	if id == "" {
		if j := firstMap(get(doc, "job")); j != nil {
			id = str(get(j, "id", "jobId"))
		}
	}
	if !validID(id) {
		// Never report a job that may not exist (the Bridge Operator
		// followed job 0 forever).
		return "", fmt.Errorf("%s: HTTP 200 without a job id: %s", r, orText(httpx.Reason(errorMessage(buf)), httpx.NotShown))
	}
	return id, nil
}

// dataPart is the "data" part: the application parameters as XML parts.
func dataPart(sp *spec, inner string) ([]byte, error) {
	var data bytes.Buffer
	dw := multipart.NewWriter(&data)
	if err := dw.SetBoundary(inner); err != nil {
		return nil, err
	}
	addParam := func(p appParam) error {
		ph := textproto.MIMEHeader{}
		ph.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"`, p.ID))
		ph.Set("Content-Type", "application/xml; charset=UTF-8")
		part, err := dw.CreatePart(ph)
		if err != nil {
			return err
		}
		x, err := xml.Marshal(p)
		if err != nil {
			return err
		}
		_, err = part.Write(x)
		return err
	}
	for _, p := range sp.params {
		if err := addParam(appParam{ID: p[0], Value: p[1]}); err != nil {
			return nil, err
		}
	}
	for _, f := range sp.files {
		if err := addParam(appParam{ID: f.name, Value: f.name + ",upload", Type: "file"}); err != nil {
			return nil, err
		}
	}
	if err := dw.Close(); err != nil {
		return nil, err
	}
	return data.Bytes(), nil
}

// writeFile writes one file part, streaming an input file.
func writeFile(ctx context.Context, mw *multipart.Writer, f file) error {
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"; filename="%s"`, f.name, f.name))
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-ID", "<"+f.name+">")
	pw, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if f.in == nil {
		_, err := pw.Write(f.data)
		return err
	}
	rc, err := f.in.Open(ctx)
	if err != nil {
		return fmt.Errorf("opening input %s: %w", f.in.Name, err)
	}
	_, err = io.Copy(pw, rc)
	rc.Close()
	if err != nil {
		return fmt.Errorf("sending input %s: %w", f.in.Name, err)
	}
	return nil
}
