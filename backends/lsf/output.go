package lsf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends"
)

// FetchOutput downloads a file the job wrote: POST ws/jobfiles/download/{id}
// with dir=<path>; a relative path is taken from the job's cwd.
func (b *Backend) FetchOutput(ctx context.Context, id, p string, w io.Writer) error {
	if !validID(id) {
		return fmt.Errorf("LSF job id %q is not a job id: %w", id, backends.ErrNotFound)
	}
	if p == "" || strings.ContainsAny(p, ",|\r\n") {
		return backends.Invalid("s3upload.files", "%q is not a file path Application Center can download (no ',' or '|')", p)
	}
	p, err := b.absPath(ctx, id, p)
	if err != nil {
		return err
	}
	form := []byte("dir=" + strings.ReplaceAll(url.QueryEscape(p), "%2F", "/"))
	r := request{method: http.MethodPost, path: "/ws/jobfiles/download/" + id, contentType: "application/x-www-form-urlencoded",
		accept: "multipart/mixed, application/octet-stream", body: func() (io.Reader, error) { return bytes.NewReader(form), nil }}
	resp, err := b.open(ctx, r)
	if se := asStatus(err); se != nil && se.status == http.StatusNotFound {
		return fmt.Errorf("output %s: %v: %w", p, se, backends.ErrNotFound)
	}
	if err != nil {
		return transientOr(err)
	}
	defer resp.Body.Close()
	return b.copyDownload(ctx, r, resp, p, w)
}

// absPath makes a path relative to the job's working directory absolute.
func (b *Backend) absPath(ctx context.Context, id, p string) (string, error) {
	if strings.HasPrefix(p, "/") {
		return p, nil
	}
	e, err := b.jobInfo(ctx, id)
	if err != nil {
		return "", err
	}
	cwd := ""
	if e != nil {
		cwd = str(get(e, "cwd", "execCwd"))
	}
	if cwd == "" {
		return "", fmt.Errorf("output %s: the job's working directory is unknown (the job left LSF's job list); give an absolute path", p)
	}
	return path.Join(cwd, p), nil
}

// copyDownload copies the file p out of a download answer: the body itself,
// or of a multipart answer the part named after the file (else the first).
func (b *Backend) copyDownload(ctx context.Context, r request, resp *http.Response, p string, w io.Writer) error {
	mt, params, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if !strings.HasPrefix(mt, "multipart/") {
		_, err := io.Copy(w, resp.Body)
		return b.readErr(ctx, r, err)
	}
	mr := multipart.NewReader(resp.Body, params["boundary"])
	base := path.Base(p)
	var first []byte
	havePart := false
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return b.readErr(ctx, r, err)
		}
		cid := strings.Trim(part.Header.Get("Content-ID"), "<>")
		if part.FormName() == base || part.FileName() == base || cid == base || part.FormName() == p || cid == p {
			_, err := io.Copy(w, part)
			return b.readErr(ctx, r, err)
		}
		if !havePart {
			first, err = io.ReadAll(io.LimitReader(part, 1<<30))
			if err != nil {
				return b.readErr(ctx, r, err)
			}
			havePart = true
		}
	}
	if !havePart {
		return fmt.Errorf("output %s: the download answer has no file: %w", p, backends.ErrNotFound)
	}
	_, err := w.Write(first)
	return err
}

func (b *Backend) readErr(ctx context.Context, r request, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return backends.Transient(fmt.Errorf("%s: reading the answer: %w", r, err))
}
