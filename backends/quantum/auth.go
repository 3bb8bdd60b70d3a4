package quantum

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bridge-runner/bridge-runner/backends"
	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

func (b *Backend) credentials() (crn, apikey string, err error) {
	if b.creds == nil {
		return "", "", backends.Invalid("credentials", "the quantum backend needs a Secret with crn (the service instance's CRN) and apikey (an IBM Cloud API key)")
	}
	crn, err = b.creds.Get("crn", "serviceCRN", "service-crn", "username")
	if err != nil {
		return "", "", err
	}
	apikey, err = b.creds.Get("apikey", "api-key", "apiKey", "password")
	if err != nil {
		return "", "", err
	}
	if !strings.HasPrefix(crn, "crn:") {
		return "", "", backends.Invalid("credentials", "the CRN must look like crn:v1:bluemix:public:quantum-computing:REGION:a/ACCOUNT:INSTANCE::")
	}
	if apikey == "" {
		return "", "", backends.Invalid("credentials", "the API key is empty")
	}
	return crn, apikey, nil
}

type tokenAnswer struct {
	AccessToken string `json:"access_token"`
	ExpiresIn   int64  `json:"expires_in"`
	Expiration  int64  `json:"expiration"`
}

// bearer returns an IAM token for the current API key, making one when
// there is none, it is about to expire, or the key changed.
func (b *Backend) bearer(ctx context.Context, apikey string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	iam := b.iamURL
	if iam == "" {
		if v, err := b.creds.Get("iam_url", "iamurl"); err == nil && v != "" {
			iam = v
		} else {
			iam = DefaultIAMURL
		}
	}
	if b.token != "" && b.tokenFor == iam+"\x00"+apikey && b.now().Before(b.tokenRenew) {
		return b.token, nil
	}
	form := url.Values{"grant_type": {"urn:ibm:params:oauth:grant-type:apikey"}, "apikey": {apikey}}.Encode()
	resp, err := httpx.Open(ctx, b.client, httpx.Request{Method: http.MethodPost, URL: iam, Timeout: b.requestTimeout,
		Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Accept": {"application/json"}},
		Body:   func() (io.Reader, error) { return strings.NewReader(form), nil }, Server: "IBM Cloud IAM", Field: "iam_url"})
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		e := readAPIError("POST IAM token", "IBM Cloud IAM", resp)
		if e.status == http.StatusBadRequest || e.status == http.StatusUnauthorized || e.status == http.StatusForbidden {
			return "", httpx.AuthError(e.op, e.status, "IAM refused the API key"+httpx.Code(e.code), "apikey")
		}
		return "", classify(e)
	}
	defer resp.Body.Close()
	var t tokenAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, httpx.MaxErrorBody)).Decode(&t); err != nil || t.AccessToken == "" {
		return "", fmt.Errorf("POST IAM token: an answer without access_token (%v)", err)
	}
	now := b.now()
	exp := now.Add(time.Hour)
	switch {
	case t.Expiration > 0:
		exp = time.Unix(t.Expiration, 0)
	case t.ExpiresIn > 0:
		exp = now.Add(time.Duration(t.ExpiresIn) * time.Second)
	}
	backends.AddSecret(b.secrets, t.AccessToken)
	b.token, b.tokenFor = t.AccessToken, iam+"\x00"+apikey
	b.tokenRenew = exp.Add(-min(5*time.Minute, exp.Sub(now)/2))
	return b.token, nil
}

func (b *Backend) dropToken(tok string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.token == tok {
		b.token = ""
	}
}
