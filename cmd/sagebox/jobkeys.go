package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// jobKeyPrefix starts the access key id of every training job's own key,
// endpointKeyPrefix that of every endpoint's (its instances' handlers sign
// with it).
const (
	jobKeyPrefix      = "SAGEBOXJOB-"
	endpointKeyPrefix = "SAGEBOXEP-"
)

// jobKeys derives each training job's access key from one server secret,
// kept in the data directory so that jobs re-adopted after a restart still
// sign with a key the server accepts. A job's key is
//
//	id:     SAGEBOXJOB-<job name>
//	secret: base64url(HMAC-SHA256(server secret, job name))
//
// so the verifier needs no table: it recomputes the secret from the id.
type jobKeys struct{ key []byte }

// loadJobKeys reads <dataDir>/job-key, creating it (mode 600) on first use.
func loadJobKeys(dataDir string) (*jobKeys, error) {
	path := filepath.Join(dataDir, "job-key")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			return nil, fmt.Errorf("job key: %w", err)
		}
		b = []byte(hex.EncodeToString(raw))
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("job key: %w", err)
		}
		_, werr := f.Write(b)
		if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
			return nil, fmt.Errorf("job key: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("job key: %w", err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) < 16 {
		return nil, fmt.Errorf("job key %s is not the hex secret sagebox wrote; delete it to make a new one", path)
	}
	return &jobKeys{key: key}, nil
}

func (k *jobKeys) secretFor(job string) string {
	m := hmac.New(sha256.New, k.key)
	m.Write([]byte(job))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// credentials is the key a job's scripts sign with.
func (k *jobKeys) credentials(job string) (accessKeyID, secret string) {
	return jobKeyPrefix + job, k.secretFor(job)
}

// endpointCredentials is the key an endpoint's instances sign with (the
// HMAC is over "endpoint/<name>": job and endpoint names are separate
// name spaces).
func (k *jobKeys) endpointCredentials(endpoint string) (accessKeyID, secret string) {
	return endpointKeyPrefix + endpoint, k.secretFor("endpoint/" + endpoint)
}

// lookup is the verifier's key source: the secret of a job's or an
// endpoint's key id.
func (k *jobKeys) lookup(accessKeyID string) (string, bool) {
	if ep, ok := strings.CutPrefix(accessKeyID, endpointKeyPrefix); ok && ep != "" {
		return k.secretFor("endpoint/" + ep), true
	}
	job, ok := strings.CutPrefix(accessKeyID, jobKeyPrefix)
	if !ok || job == "" {
		return "", false
	}
	return k.secretFor(job), true
}
